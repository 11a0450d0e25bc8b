"""COMMIT through the extended protocol (issue #34), with psycopg 3 and asyncpg.
Usage: causal_commit.py HOST PORT USER PASSWORD DATABASE TABLE FIRST_ID. Replay is paused on the
standby and the primary's WAL is ahead of it. Each case opens its own connection, runs one
transaction and ends it with a COMMIT sent as extended messages — psycopg's commit()
(Parse/Bind/Describe/Execute/Sync, unnamed), psycopg's prepare=True and asyncpg's prepared
statement (named) — then reads outside it. Prints `CASE RECOVERY SEEN`: pg_is_in_recovery() of
the read after the commit (t: the standby), and for a transaction that wrote (through TABLE_outer,
a STABLE function calling a VOLATILE one that inserts: no write the parse can see) whether the
read saw its row (`-` for a transaction that only read)."""
import asyncio
import itertools
import sys

HOST, PORT, USER, PASSWORD, DATABASE, TABLE = sys.argv[1:7]
IDS = itertools.count(int(sys.argv[7]))
READ = f"SELECT pg_is_in_recovery(), count(*) FROM {TABLE} WHERE id = %s"


def show(case, i, recovery, count):
    seen = "-" if i == 0 else ("seen" if count == 1 else "missed")
    print(case, "t" if recovery else "f", seen)


def psycopg_case(case, writes, prepared):
    import psycopg
    c = psycopg.connect(host=HOST, port=PORT, user=USER, password=PASSWORD, dbname=DATABASE)
    i = next(IDS) if writes else 0
    c.execute(f"SELECT {TABLE}_outer(%s)" if writes else f"SELECT count(*) FROM {TABLE} WHERE id >= %s", (i,))
    if prepared:
        c.execute("COMMIT", prepare=True)
    else:
        c.commit()
    c.autocommit = True
    show(case, i, *c.execute(READ, (i,)).fetchone())
    c.close()


async def asyncpg_case(case, writes):
    import asyncpg
    c = await asyncpg.connect(host=HOST, port=int(PORT), user=USER, password=PASSWORD, database=DATABASE)
    i = next(IDS) if writes else 0
    await c.execute("BEGIN")
    commit = await c.prepare("COMMIT")
    await c.fetchval(f"SELECT {TABLE}_outer($1)" if writes else f"SELECT count(*) FROM {TABLE} WHERE id >= $1", i)
    await commit.fetch()
    r = await c.fetchrow(READ.replace("%s", "$1"), i)
    show(case, i, r[0], r[1])
    await c.close()


for writes in (False, True):
    what = "wrote" if writes else "read-only"
    psycopg_case(f"psycopg commit() {what}", writes, False)
    psycopg_case(f"psycopg prepared COMMIT {what}", writes, True)
    asyncio.run(asyncpg_case(f"asyncpg prepared COMMIT {what}", writes))
