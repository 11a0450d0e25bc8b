# asyncpg executemany through the router; driven by tests/it/pg_stream.rs. A unique violation on
# row 3 of 2000 rows of 32 KiB: the server reports it at once, so the client must see it long
# before it has sent all 64 MB of the batch (directly: after ~20 rows).
# usage: asyncpg_executemany.py PORT DATABASE TABLE
import asyncio
import signal
import sys

import asyncpg


async def main(port, database, table):
    con = await asyncpg.connect(host="127.0.0.1", port=port, user="app", password="app", database=database)
    await con.execute(f"CREATE TABLE {table}(a text primary key, b int)")
    pos = 0

    def rows():
        nonlocal pos
        while pos < 2000:
            pos += 1
            yield ("a", 0) if pos < 3 else ("a" * 32768, pos)

    try:
        await con.executemany(f"INSERT INTO {table} VALUES($1, $2)", rows())
        print("no error")
    except asyncpg.UniqueViolationError:
        print("unique violation")
    print("rows generated", pos)
    print("after", await con.fetchval("SELECT count(*) FROM " + table))
    await con.execute(f"DROP TABLE {table}")
    await con.close()


signal.alarm(60)
asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
