"""psycopg 3 binding the seed's HTAP array as a binary-format parameter (`%b`, #35): a str is
sent as `text` in binary, which the router decodes; a Python list is sent as a binary int
array, which is no JSON array's text and is refused. Prints `binary VALUE ids...` (sorted) or
`binary VALUE error SQLSTATE`, `list error SQLSTATE MESSAGE`, then `after` with the next
statement's answer.

usage: psycopg_htap_binary.py DSN VALUE...
"""
import sys

import psycopg

SQL = "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, %b)"
with psycopg.connect(sys.argv[1], autocommit=True) as c:
    for value in sys.argv[2:]:
        try:
            rows = c.execute(SQL, (value,)).fetchall()
            print("binary", value, "ids", *sorted(r[0] for r in rows))
        except psycopg.Error as e:
            print("binary", value, "error", e.sqlstate)
    try:
        c.execute(SQL, ([1, 2],))
        print("list ran")
    except psycopg.Error as e:
        print("list error", e.sqlstate, e.diag.message_primary)
    print("after", c.execute("SELECT 1").fetchone()[0])
