"""PyMySQL cells of the MariaDB causal matrix (issue #34) for LOAD DATA LOCAL INFILE
(`local_infile=True`). Usage: pymysql_causal_infile.py PORT USER PASSWORD DATABASE TABLE FIRST_ID.
The replica's SQL thread is stopped. For each path (the statement alone, after a SELECT in one
multi-statement text, between BEGIN and COMMIT sent one by one, and all three in one text), a
fresh connection reads row n (on the replica: none yet), loads a file holding row n, reads it
back, hands its token (SHOW querypilot.causal_token) to a second connection by SET and to a third
as connection attribute `querypilot.causal_token`. Prints `PATH BEFORE_COUNT BEFORE_SERVER
WRITER_COUNT WRITER_SERVER OTHER_COUNT OTHER_SERVER ATTR_COUNT ATTR_SERVER` (`@@server_id`)."""
import os
import sys
import tempfile

import pymysql
from pymysql.constants import CLIENT

port, user, password, db, t, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])


def conn(token=None):
    c = pymysql.connect(host="127.0.0.1", port=port, user=user, password=password, database=db, autocommit=True,
                        client_flag=CLIENT.MULTI_STATEMENTS, local_infile=True, defer_connect=True)
    if token is not None:
        c._connect_attrs["querypilot.causal_token"] = token
    c.connect()
    return c


def read(c, i):
    cur = c.cursor()
    cur.execute(f"SELECT COUNT(*), @@server_id FROM {t} WHERE id = {i}")
    return cur.fetchone()


def run(c, sql):
    cur = c.cursor()
    cur.execute(sql)
    while cur.nextset():
        pass


with tempfile.TemporaryDirectory() as d:
    for path in ["text", "multi", "begin-commit", "begin-commit-multi"]:
        n += 1
        name = os.path.join(d, f"row{n}.csv")
        with open(name, "w") as f:
            f.write(f"{n}\n")
        load = f"LOAD DATA LOCAL INFILE '{name}' INTO TABLE {t}"
        texts = {"text": [load], "multi": [f"SELECT 1; {load}"], "begin-commit": ["BEGIN", load, "COMMIT"],
                 "begin-commit-multi": [f"BEGIN; {load}; COMMIT"]}[path]
        w = conn()
        before = read(w, n)
        for sql in texts:
            run(w, sql)
        mine = read(w, n)
        cur = w.cursor()
        cur.execute("SHOW querypilot.causal_token")
        token = cur.fetchone()[0]
        o = conn()
        run(o, f"SET querypilot.causal_token = '{token}'")
        print(path, *before, *mine, *read(o, n), *read(conn(token), n), flush=True)
