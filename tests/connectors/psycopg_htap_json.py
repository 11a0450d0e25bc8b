"""psycopg 3 against the seed's HTAP translation with the array as a server-side parameter (#35):
`SELECT id FROM tags WHERE JSON_OVERLAPS(labels, %s)` sent as Parse with `$1` and the value in
Bind, unnamed (`param`) and as a named prepared statement (`prepared`, prepare=True), in
autocommit. Prints `param|prepared VALUE ids...` (sorted) or `param|prepared VALUE error SQLSTATE`,
then `after` with the next statement's answer, so a refusal is seen not to end the session.

usage: psycopg_htap_json.py DSN VALUE...
"""
import sys

import psycopg

SQL = "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, %s)"
with psycopg.connect(sys.argv[1], autocommit=True) as c:
    for value in sys.argv[2:]:
        for how in ("param", "prepared"):
            try:
                rows = c.execute(SQL, (value,), prepare=(how == "prepared")).fetchall()
                print(how, value, "ids", *sorted(r[0] for r in rows))
            except psycopg.Error as e:
                print(how, value, "error", e.sqlstate)
    print("after", c.execute("SELECT 1").fetchone()[0])
