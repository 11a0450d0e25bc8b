"""PyMySQL values that quoting can get wrong (#33): PyMySQL interpolates parameters on the
client, escaping by the server's NO_BACKSLASH_ESCAPES status flag. Injection payloads first (on a
table holding only the victim row), then each value written, read back and searched for.

Usage: pymysql_values.py HOST PORT USER PASSWORD DATABASE TABLE AUTOCOMMIT(0|1). Prints
`backend NAME` (where the statements ran), then one line per check; the Rust test compares them
with what MariaDB itself prints.
"""
import sys

import pymysql

host, port, user, password, database, table, autocommit = sys.argv[1:8]
VALUES = [
    "'", "\\", "\\'", "\\\\'", "''", "%", "_", "a%b_c\\%\\_", "ünïcödé ✓ 🐘 日本",
    "nomatch\\' OR id = 22 --", "x'); DELETE FROM " + table + "; --",
    "\\'; UPDATE " + table + " SET v = 'pwned' -- x", "\"double\" `tick`", "$$dollar$$ $q$",
    "/* c */ #h -- d", "\n\r\t\x1a\b end", "?", "$1",
]

conn = pymysql.connect(host=host, port=int(port), user=user, password=password, database=database,
                       charset="utf8mb4", ssl=None, autocommit=autocommit == "1")
cur = conn.cursor()
cur.execute("SELECT version()")
print("backend", "postgres" if cur.fetchone()[0].startswith("PostgreSQL") else "mariadb")
cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v TEXT)")
cur.execute(f"INSERT INTO {table} (id, v) VALUES (22, 'victim')")
conn.commit()
# A fresh connection's first statement is quoted by the greeting's flags alone (PyMySQL does not
# read the login's OK): the greeting must be right for whichever pool the database picks.
fresh = pymysql.connect(host=host, port=int(port), user=user, password=password, database=database,
                        charset="utf8mb4", ssl=None, autocommit=True)
n = fresh.cursor().execute(f"UPDATE {table} SET v = 'X' WHERE v = %s", ("nomatch\\' OR id = 22 -- ",))
print("injection first statement updated", n)
fresh.close()
for payload in ["nomatch\\' OR id = 22 --", "nomatch\\' OR id = 22 -- ", "\\' OR id = 22 #"]:
    try:
        n = cur.execute(f"UPDATE {table} SET v = 'X' WHERE v = %s", (payload,))
        print("injection", repr(payload), "updated", n)
    except pymysql.err.MySQLError as e:
        print("injection", repr(payload), "error", e.args[0])
conn.commit()
for i, v in enumerate(VALUES, 1):
    print("insert", i, cur.execute(f"INSERT INTO {table} (id, v) VALUES (%s, %s)", (i, v)))
conn.commit()
cur.execute(f"SELECT id, v FROM {table} ORDER BY id")
for i, v in cur.fetchall():
    want = VALUES[i - 1] if i <= len(VALUES) else "victim"
    print("value", i, "same" if v == want else "differs " + repr(v))
for i, v in enumerate(VALUES, 1):
    cur.execute(f"SELECT id FROM {table} WHERE v = %s ORDER BY id", (v,))
    print("found", i, [r[0] for r in cur.fetchall()])
print("like", cur.execute(f"SELECT id FROM {table} WHERE v LIKE %s", ("%\\\\\\%%",)))
try:
    cur.execute(f"INSERT INTO {table} (id, v) VALUES (%s, %s)", (50, "a\0b"))
    cur.execute(f"SELECT v FROM {table} WHERE id = 50")
    print("nul stored", str(cur.fetchone()[0] == "a\0b").lower())
except pymysql.err.MySQLError as e:
    print("nul refused", e.args[0])
conn.rollback()
print("updated", cur.execute(f"UPDATE {table} SET v = %s WHERE v IN (%s, %s)", ("changed", "\\", "\\'")))
conn.rollback()
cur.execute(f"DROP TABLE {table}")
conn.commit()
conn.close()
print("closed")
