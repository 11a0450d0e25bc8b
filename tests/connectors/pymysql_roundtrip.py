"""PyMySQL through the router's MySQL listener: connect (PyMySQL turns autocommit off and sets
its charset), parameters interpolated client-side with quoting that honours the server's
NO_BACKSLASH_ESCAPES flag, executemany, commit and rollback, and a duplicate-key error.

Usage: pymysql_roundtrip.py HOST PORT USER PASSWORD DATABASE TABLE. Prints one line per check;
the Rust test compares them. Exits non-zero on any unexpected error.
"""
import datetime
import decimal
import sys

import pymysql

host, port, user, password, database, table = sys.argv[1:7]
conn = pymysql.connect(host=host, port=int(port), user=user, password=password, database=database,
                       charset="utf8mb4", ssl=None)
cur = conn.cursor()
cur.execute("SELECT 1 + 1")
print("sum", cur.fetchone()[0])
cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(50), amount DECIMAL(10,2), at TIMESTAMP NULL)")
conn.commit()
rows = [
    (1, "it's \"quoted\" \\ back", decimal.Decimal("-12.34"), datetime.datetime(2026, 12, 3, 4, 5, 6)),
    (2, "ünïcödé ✓ 🐘", decimal.Decimal("99999999.99"), None),
    (3, None, None, None),
]
cur.executemany(f"INSERT INTO {table} (id, name, amount, at) VALUES (%s, %s, %s, %s)", rows)
conn.commit()
cur.execute(f"SELECT id, name, amount, at FROM {table} WHERE id IN %s ORDER BY id", ((1, 2, 3),))
for r in cur.fetchall():
    print("row", repr(r))
cur.execute(f"UPDATE {table} SET name = %s WHERE id = %s", ("rolled back", 1))
print("updated", cur.rowcount)
conn.rollback()
cur.execute(f"SELECT name FROM {table} WHERE id = %s", (1,))
print("after rollback", repr(cur.fetchone()[0]))
try:
    cur.execute(f"INSERT INTO {table} (id) VALUES (%s)", (2,))
    print("duplicate accepted")
except pymysql.err.IntegrityError as e:
    print("duplicate", e.args[0])
conn.rollback()
cur.execute(f"DROP TABLE {table}")
conn.commit()
conn.close()
print("closed")
