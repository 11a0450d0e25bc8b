"""PyMySQL (text protocol) reading typed results through the router (#35 type round trips).
Usage: pymysql_types.py HOST PORT USER PASSWORD DATABASE SQL...
Runs each SQL in order; a statement without a result set prints `ok`, a failed one
`error CODE`. For each column of each row it prints
`NAME type=TYPE_CODE len=LENGTH dec=DECIMALS charset=CHARSETNR binary=0|1 value=REPR`.
"""
import sys

import pymysql

host, port, user, password, db = sys.argv[1:6]
c = pymysql.connect(host=host, port=int(port), user=user, password=password, database=db, autocommit=True)
cur = c.cursor()
for sql in sys.argv[6:]:
    try:
        cur.execute(sql)
    except pymysql.MySQLError as e:
        print("error", e.args[0])
        continue
    if cur.description is None:
        print("ok")
        continue
    fields = cur._result.fields
    for row in cur.fetchall():
        for f, v in zip(fields, row):
            binary = 1 if f.flags & 128 else 0
            print(f"{f.name} type={f.type_code} len={f.length} dec={f.scale} charset={f.charsetnr} "
                  f"binary={binary} value={v!r}")
c.close()
