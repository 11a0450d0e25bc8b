"""Declared read-only transactions through the router (issue #34), with psycopg 3 and asyncpg.
Usage: causal_readonly.py PHASE HOST PORT USER PASSWORD DATABASE TABLE. Each case opens its own
connection and runs one read-only transaction declared its own way, then prints
`CASE RECOVERY SEEN`: pg_is_in_recovery() inside the transaction (t: it ran on the standby) and
whether the transaction saw the row the case wrote first. PHASE `replica`: nothing is written
first (SEEN is `-`). PHASE `paused`: replay is paused on the standby and each case first writes
a row through the same connection, so its transaction must run on the primary and see it.
Also prints what the router does with a statement it deems unsafe inside such a transaction on
a replica, and with `SET TRANSACTION READ WRITE` opening a transaction that began on one."""
import asyncio
import itertools
import sys

PHASE, HOST, PORT, USER, PASSWORD, DATABASE, TABLE = sys.argv[1:8]
IDS = itertools.count(int(sys.argv[8]) if len(sys.argv) > 8 else 1)
INSIDE = f"SELECT pg_is_in_recovery(), count(*) FROM {TABLE} WHERE id = %s"


def connect(**kw):
    import psycopg
    kw.setdefault("autocommit", True)
    return psycopg.connect(host=HOST, port=PORT, user=USER, password=PASSWORD, dbname=DATABASE, **kw)


def write(c, mode_read_write=False):
    """Writes a fresh row through `c` (in PHASE paused); returns its id (0: nothing written)."""
    if PHASE != "paused":
        return 0
    i = next(IDS)
    if mode_read_write:
        # The session defaults to read-only: an explicit READ WRITE transaction writes.
        c.execute("BEGIN READ WRITE")
        c.execute(f"INSERT INTO {TABLE} VALUES ({i})")
        c.execute("COMMIT")
    else:
        c.execute(f"INSERT INTO {TABLE} VALUES (%s)", (i,))
    return i


def show(case, i, recovery, count):
    seen = "-" if i == 0 else ("seen" if count == 1 else "missed")
    print(case, "t" if recovery else "f", seen)


def inside(c, i, prepare=None):
    r = c.execute(INSIDE, (i,), prepare=prepare).fetchone()
    return r[0], r[1]


def read_only_attribute():
    """psycopg's own read_only flag: it sends BEGIN READ ONLY."""
    with connect() as c:
        i = write(c)
        c.autocommit = False
        c.read_only = True
        with c.transaction():
            show("psycopg_read_only", i, *inside(c, i))


def begin_text(begin, prepare):
    with connect() as c:
        i = write(c)
        c.execute(begin)
        rec = inside(c, i, prepare)
        c.execute("COMMIT")
        show(f"psycopg {begin} prepare={prepare}", i, *rec)


def set_transaction():
    """BEGIN, then SET TRANSACTION READ ONLY as its first statement."""
    with connect() as c:
        i = write(c)
        c.execute("BEGIN")
        c.execute("SET TRANSACTION READ ONLY")
        rec = inside(c, i)
        c.execute("COMMIT")
        show("psycopg SET TRANSACTION READ ONLY", i, *rec)


def session_default(how):
    """The session's default made read-only, then a plain BEGIN."""
    options = "-c default_transaction_read_only=on" if how == "startup" else None
    with connect(options=options) if options else connect() as c:
        if how == "characteristics":
            i = write(c)
            c.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        elif how == "set":
            i = write(c)
            c.execute("SET default_transaction_read_only = on")
        else:
            i = write(c, mode_read_write=True)
        c.execute("BEGIN")
        rec = inside(c, i)
        c.execute("COMMIT")
        show(f"psycopg default {how}", i, *rec)


def pipeline():
    """BEGIN READ ONLY, the read and COMMIT in one pipeline (one batch, extended protocol)."""
    with connect() as c:
        i = write(c)
        with c.pipeline():
            c.execute("BEGIN READ ONLY")
            cur = c.execute(INSIDE, (i,))
            c.execute("COMMIT")
        show("psycopg pipeline", i, *cur.fetchone())


async def asyncpg_case():
    import asyncpg
    c = await asyncpg.connect(host=HOST, port=int(PORT), user=USER, password=PASSWORD, database=DATABASE)
    i = 0
    if PHASE == "paused":
        i = next(IDS)
        await c.execute(f"INSERT INTO {TABLE} VALUES ($1)", i)
    async with c.transaction(readonly=True):
        r = await c.fetchrow(INSIDE.replace("%s", "$1"), i)
    show("asyncpg readonly", i, r[0], r[1])
    await c.close()


def refusals():
    """Inside a read-only transaction on the standby: an advisory lock (which a standby would
    take without excluding the primary's holders) is refused with 25006 and the transaction
    goes on there; SET TRANSACTION READ WRITE as the first statement moves it to the primary."""
    import psycopg
    with connect() as c:
        c.execute("BEGIN READ ONLY")
        try:
            c.execute("SELECT pg_advisory_xact_lock(34)")
            print("advisory lock ran")
        except psycopg.Error as e:
            print("advisory lock refused", e.sqlstate)
        print("after the refusal", "t" if c.execute("SELECT pg_is_in_recovery()").fetchone()[0] else "f")
        c.execute("ROLLBACK")
    with connect() as c:
        c.execute("SET default_transaction_read_only = on")
        c.execute("BEGIN")
        c.execute("SET TRANSACTION READ WRITE")
        i = 1_000_000 + next(IDS)
        c.execute(f"INSERT INTO {TABLE} VALUES (%s)", (i,))
        print("read write moved", "t" if c.execute("SELECT pg_is_in_recovery()").fetchone()[0] else "f")
        c.execute("ROLLBACK")


read_only_attribute()
begin_text("BEGIN READ ONLY", None)
begin_text("START TRANSACTION READ ONLY", True)
begin_text("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", False)
set_transaction()
for how in ["characteristics", "set", "startup"]:
    session_default(how)
pipeline()
asyncio.run(asyncpg_case())
if PHASE == "replica":
    refusals()
