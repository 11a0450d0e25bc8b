"""Cross-connection write-then-read trials through the router (issue #34, perf/causal_trials.sh).
Usage: causal_trials.py PORT USER PASSWORD DATABASE TABLE TRIALS WORKERS
Each worker holds a writer and a reader connection. One trial: the writer inserts a fresh row
and reads its causal token (SHOW querypilot.causal_token); the reader adopts it (SET) and reads
the row back with pg_is_in_recovery(). A read that misses the row is stale. Prints
`trials N stale S on_replica R elapsed_s E`."""
import asyncio
import sys
import time

PORT, USER, PASSWORD, DATABASE, TABLE = sys.argv[1:6]
TRIALS, WORKERS = int(sys.argv[6]), int(sys.argv[7])


async def worker(k, counts):
    import asyncpg
    args = dict(host="127.0.0.1", port=int(PORT), user=USER, password=PASSWORD, database=DATABASE)
    w, r = await asyncpg.connect(**args), await asyncpg.connect(**args)
    insert = f"INSERT INTO {TABLE} VALUES ($1)"
    read = f"SELECT count(*), pg_is_in_recovery() FROM {TABLE} WHERE id = $1"
    for n in range(k, TRIALS, WORKERS):
        await w.execute(insert, n)
        token = await w.fetchval("SHOW querypilot.causal_token")
        await r.execute(f"SET querypilot.causal_token = '{token}'")
        count, recovery = await r.fetchrow(read, n)
        counts["stale"] += count != 1
        counts["replica"] += bool(recovery)
    await w.close()
    await r.close()


async def main():
    counts = {"stale": 0, "replica": 0}
    start = time.monotonic()
    await asyncio.gather(*(worker(k, counts) for k in range(WORKERS)))
    elapsed = time.monotonic() - start
    print(f"trials {TRIALS} stale {counts['stale']} on_replica {counts['replica']} elapsed_s {elapsed:.1f}")


asyncio.run(main())
