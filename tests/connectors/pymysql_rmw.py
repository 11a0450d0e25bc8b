"""PyMySQL read-modify-write transactions through a read/write split (#19): PyMySQL's default
autocommit=False makes every statement part of a transaction, so each SELECT must run where the
UPDATE that follows it runs, on the primary.

Usage: pymysql_rmw.py HOST PORT USER PASSWORD DATABASE TABLE ROUNDS. Prints one line per round
("round N server S"; S is the @@server_id that answered inside the transaction) and the final
value; exits non-zero on any error.
"""
import sys

import pymysql

host, port, user, password, database, table, rounds = sys.argv[1:8]
conn = pymysql.connect(host=host, port=int(port), user=user, password=password, database=database)
assert conn.get_autocommit() is False, "PyMySQL's default is autocommit off"
cur = conn.cursor()
for i in range(int(rounds)):
    cur.execute(f"SELECT v, @@server_id FROM {table} WHERE id = 1")
    v, server = cur.fetchone()
    cur.execute(f"UPDATE {table} SET v = %s WHERE id = 1", (v + 1,))
    cur.execute("SELECT @@server_id")
    after = cur.fetchone()[0]
    conn.commit()
    print("round", i, "server", server, after)
cur.execute(f"SELECT v FROM {table} WHERE id = 1")
print("final", cur.fetchone()[0])
conn.commit()
conn.close()
