"""PyMySQL against the seed's HTAP translation (#35): for each value, the statement
`SELECT id FROM tags WHERE JSON_OVERLAPS(labels, <value>)` with the value as a string literal
written into the text and as a PyMySQL parameter (client-side interpolation), autocommit on.
Prints `literal|param VALUE ids...` (sorted) or `literal|param VALUE error CODE`.

usage: pymysql_htap_json.py HOST PORT USER PASSWORD DATABASE VALUE...
"""
import sys

import pymysql

host, port, user, password, database = sys.argv[1:6]
c = pymysql.connect(host=host, port=int(port), user=user, password=password, database=database, autocommit=True)
cur = c.cursor()
for value in sys.argv[6:]:
    for how in ("literal", "param"):
        try:
            if how == "literal":
                cur.execute("SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '%s')" % value.replace("'", "''"))
            else:
                cur.execute("SELECT id FROM tags WHERE JSON_OVERLAPS(labels, %s)", (value,))
            ids = sorted(r[0] for r in cur.fetchall())
            print(how, value, "ids", *ids)
        except pymysql.MySQLError as e:
            print(how, value, "error", e.args[0])
