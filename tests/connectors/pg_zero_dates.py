"""MariaDB dates that name no calendar day, read by PostgreSQL clients through the reverse bridge
(#35). Usage: pg_zero_dates.py DSN TABLE. Reads `SELECT id, d, ts FROM TABLE ORDER BY id` with
psycopg 3 in text and in binary format, psycopg2 (text) and asyncpg (binary), and prints one line
per row: `driver format id d ts` (Python reprs), plus psycopg 3's notices.
"""
import asyncio
import sys

import asyncpg
import psycopg
import psycopg2

dsn, table = sys.argv[1:3]
SQL = f"SELECT id, d, ts FROM {table} ORDER BY id"


def show(driver, fmt, rows):
    for r in rows:
        print(driver, fmt, r[0], repr(r[1]), repr(r[2]))


with psycopg.connect(dsn, autocommit=True) as c:
    c.add_notice_handler(lambda d: print("notice", d.severity, d.sqlstate, d.message_primary))
    for binary in (False, True):
        with c.cursor(binary=binary) as cur:
            cur.execute(SQL)
            show("psycopg", "binary" if binary else "text", cur.fetchall())

c2 = psycopg2.connect(dsn)
cur = c2.cursor()
cur.execute(SQL)
show("psycopg2", "text", cur.fetchall())
c2.close()


async def run_asyncpg():
    parts = dict(p.split("=", 1) for p in dsn.split())
    c = await asyncpg.connect(host=parts["host"], port=int(parts["port"]), user=parts["user"],
                              password=parts["password"], database=parts["dbname"])
    show("asyncpg", "binary", await c.fetch(SQL))
    await c.close()

asyncio.run(run_asyncpg())
