# asyncpg client-side timeouts through the router; driven by tests/it/pg_cancel.rs (the shape of
# ../shared/repro/r_late_cancel.py). A timed-out call sends a CancelRequest and must raise
# TimeoutError; the cancel must stop only the statement it was sent for, never the next one.
# asyncpg sends its next statement once the server closed the cancel connection, so the router
# may close it only after the cancel was delivered.
# usage: asyncpg_late_cancel.py PORT DATABASE ITERATIONS
import asyncio
import sys

import asyncpg


async def main(port, database, n):
    con = await asyncpg.connect(host="127.0.0.1", port=port, user="app", password="app", database=database)
    st = await con.prepare("select pg_sleep(10)")
    bad = 0
    for i in range(n):
        for m in ("fetch", "fetchrow", "fetchval"):
            try:
                await getattr(st, m)(timeout=0.02)
                bad += 1
                print(i, m, "the sleep was not cancelled")
            except asyncio.TimeoutError:
                pass
            except asyncpg.QueryCanceledError:
                bad += 1
                print(i, m, "the timed-out statement raised QueryCanceledError")
            try:
                await con.fetch("select 1")
            except asyncpg.QueryCanceledError:
                bad += 1
                print(i, m, "the following statement was cancelled")
    await con.close()
    print("anomalies:", bad)


asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
