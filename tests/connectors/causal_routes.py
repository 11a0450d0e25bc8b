"""The causal token through the extended protocol (issue #34): psycopg 3 named prepared
statements (`prepare=True`) and pipelines, asyncpg's prepared statements. Usage:
causal_routes.py CASE HOST PORT USER PASSWORD DATABASE TABLE TOKEN. Prints one line per
observation: what SHOW returned, and a read's row count with pg_is_in_recovery()."""
import asyncio
import sys

CASE, HOST, PORT, USER, PASSWORD, DATABASE, TABLE, TOKEN = sys.argv[1:9]
READ = f"SELECT count(*), pg_is_in_recovery() FROM {TABLE}"
SET = f"SET querypilot.causal_token = '{TOKEN}'"
SHOW = "SHOW querypilot.causal_token"


def psycopg_connect():
    import psycopg
    return psycopg.connect(host=HOST, port=PORT, user=USER, password=PASSWORD, dbname=DATABASE, autocommit=True)


def row(r):
    return " ".join({True: "t", False: "f"}.get(v, str(v)) if isinstance(v, bool) else str(v) for v in r)


def psycopg_named():
    """SET and SHOW as named prepared statements, several times (prepared once, run again)."""
    with psycopg_connect() as c:
        print("show before", repr(c.execute(SHOW, prepare=True).fetchone()[0]))
        for _ in range(3):
            c.execute(SET, prepare=True)
        print("show after", c.execute(SHOW, prepare=True).fetchone()[0])
        c.execute("SET querypilot.causal_token TO DEFAULT", prepare=True)
        print("read", row(c.execute(READ).fetchone()))
        try:
            c.execute(f"SET querypilot.causal_token = 'nonsense'", prepare=True)
        except Exception as e:
            print("invalid", e.sqlstate)
        print("read again", row(c.execute(READ).fetchone()))


def psycopg_pipeline():
    """SET then the read in one pipeline (one batch up to its Sync)."""
    with psycopg_connect() as c:
        with c.pipeline():
            c.execute(SET, prepare=True)
            cur = c.execute(READ)
            show = c.execute(SHOW)
        print("read", row(cur.fetchone()))
        print("show", show.fetchone()[0])


async def asyncpg_prepared():
    """fetchval(SHOW) and a prepared SET: asyncpg always uses named statements."""
    import asyncpg
    c = await asyncpg.connect(host=HOST, port=int(PORT), user=USER, password=PASSWORD, database=DATABASE)
    print("show before", repr(await c.fetchval(SHOW)))
    stmt = await c.prepare(SET)
    await stmt.fetch()
    print("show after", await c.fetchval(SHOW))
    r = await c.fetchrow(READ)
    print("read", r[0], "t" if r[1] else "f")
    await c.close()


CASES = {"psycopg_named": psycopg_named, "psycopg_pipeline": psycopg_pipeline, "asyncpg_prepared": asyncpg_prepared}
result = CASES[CASE]()
if asyncio.iscoroutine(result):
    asyncio.run(result)
