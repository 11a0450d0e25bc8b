"""Prepared statements as asyncpg and psycopg 3 use them, after schema changes and named from
SQL (issue #18). Usage: pg_prepared_ddl.py CASE HOST PORT USER PASSWORD DATABASE TABLE.
Prints one line per observation; run directly against PostgreSQL and through the router, the
output must be the same."""
import asyncio
import sys

CASE, HOST, PORT, USER, PASSWORD, DATABASE, TABLE = sys.argv[1:8]
KW = dict(host=HOST, port=int(PORT), user=USER, password=PASSWORD, database=DATABASE)


async def asyncpg_connect():
    import asyncpg
    return await asyncpg.connect(**KW)


def psycopg_connect():
    import psycopg
    return psycopg.connect(host=HOST, port=PORT, user=USER, password=PASSWORD, dbname=DATABASE, autocommit=True)


async def stale_plan():
    """asyncpg: ALTER ... TYPE, then the same query on the same and on a new connection."""
    con = await asyncpg_connect()
    await con.execute(f"DROP TABLE IF EXISTS {TABLE}; CREATE TABLE {TABLE}(a int, b int); INSERT INTO {TABLE} VALUES (1, 2)")
    print("before", tuple(await con.fetchrow(f"SELECT * FROM {TABLE}")))
    await con.execute(f"ALTER TABLE {TABLE} ALTER COLUMN b TYPE text")
    for attempt in range(2):
        try:
            print("after", attempt, tuple(await con.fetchrow(f"SELECT * FROM {TABLE}")))
        except Exception as e:
            print("after", attempt, "ERROR", type(e).__name__)
    con2 = await asyncpg_connect()
    print("new connection", tuple(await con2.fetchrow(f"SELECT * FROM {TABLE}")))
    await con.execute(f"DROP TABLE {TABLE}")
    await con.close()
    await con2.close()


async def other_client():
    """asyncpg: A prepares, re-creates the table with other types; B (new) prepares the same text."""
    a = await asyncpg_connect()
    await a.execute(f"DROP TABLE IF EXISTS {TABLE}; CREATE TABLE {TABLE}(a int, b int); INSERT INTO {TABLE} VALUES (1, 2)")
    print("client A", tuple(await a.fetchrow(f"SELECT * FROM {TABLE}")))
    await a.execute(f"DROP TABLE {TABLE}; CREATE TABLE {TABLE}(a int, b text); INSERT INTO {TABLE} VALUES (1, 'x')")
    b = await asyncpg_connect()
    try:
        print("client B", tuple(await b.fetchrow(f"SELECT * FROM {TABLE}")))
    except Exception as e:
        print("client B ERROR", type(e).__name__)
    print("client A again", tuple(await a.fetchrow(f"SELECT * FROM {TABLE}")))
    await b.execute(f"DROP TABLE {TABLE}")
    await a.close()
    await b.close()


async def param_types():
    """asyncpg: the parameter types of a statement prepared again after the table changed."""
    con = await asyncpg_connect()
    await con.execute(f"DROP TABLE IF EXISTS {TABLE}; CREATE TABLE {TABLE} (v date)")
    st = await con.prepare(f"INSERT INTO {TABLE} VALUES ($1)")
    print("before", [t.name for t in st.get_parameters()])
    await con.execute(f"DROP TABLE {TABLE}; CREATE TABLE {TABLE} (v time)")
    await con.reload_schema_state()
    st = await con.prepare(f"INSERT INTO {TABLE} VALUES ($1)")
    print("after", [t.name for t in st.get_parameters()])
    import datetime
    await st.fetch(datetime.time(12, 34))
    print("stored", await con.fetchval(f"SELECT v::text FROM {TABLE}"))
    await con.execute(f"DROP TABLE {TABLE}")
    await con.close()


def deallocate():
    """psycopg: protocol-level named statements used from SQL EXECUTE / DEALLOCATE."""
    import psycopg
    conn = psycopg_connect()
    print("prepare", conn.pgconn.prepare(b"s1", b"select 41 + 1").status)
    for sql in ("EXECUTE s1", "EXECUTE S1", "DEALLOCATE s1", "EXECUTE s1", "DEALLOCATE s1"):
        try:
            cur = conn.execute(sql)
            print(sql, "->", cur.statusmessage, cur.fetchall() if cur.description else "")
        except psycopg.Error as e:
            print(sql, "-> ERROR", e.sqlstate)
    print("prepare again", conn.pgconn.prepare(b"s1", b"select 2").status)
    for sql in (b"EXECUTE s1", b"DEALLOCATE PREPARE s1", b"EXECUTE s1"):
        r = conn.pgconn.exec_(sql)   # the simple protocol
        print(sql.decode(), "(simple) ->", r.status, r.get_value(0, 0) if r.ntuples else r.error_field(psycopg.pq.DiagnosticField.SQLSTATE))
    conn.pgconn.prepare(b"s2", b"select 2")
    conn.pgconn.prepare(b"s3", b"select 3")
    print("DEALLOCATE ALL ->", conn.execute("DEALLOCATE ALL").statusmessage)
    for name in (b"s2", b"s3"):
        r = conn.pgconn.exec_prepared(name, [])
        print("exec", name.decode(), "after DEALLOCATE ALL ->", r.error_field(psycopg.pq.DiagnosticField.SQLSTATE))
    # psycopg's own cache: prepare everything, keep one; evicting runs SQL DEALLOCATE (libpq < 17).
    conn.prepare_threshold = 0
    conn.prepared_max = 1
    for i in range(3):
        for sql in ("select 1::bigint", "select 1::text", "select 1::int"):
            conn.execute(sql).fetchall()
    print("cache eviction ok")
    conn.close()


def duplicate():
    """psycopg: Parse of a name that exists fails with 42P05 and keeps the old statement."""
    import psycopg
    conn = psycopg_connect()
    for i in range(2):
        r = conn.pgconn.prepare(b"s1", b"select 1")
        print("prepare", i, r.status, r.error_field(psycopg.pq.DiagnosticField.SQLSTATE),
              (r.error_message or b"").decode().strip())
    r = conn.pgconn.prepare(b"s1", b"select 2")
    print("prepare other text", r.status, r.error_field(psycopg.pq.DiagnosticField.SQLSTATE))
    r = conn.pgconn.exec_prepared(b"s1", [])
    print("exec s1 ->", r.status, r.get_value(0, 0))
    conn.close()


CASES = {"stale_plan": stale_plan, "other_client": other_client, "param_types": param_types,
         "deallocate": deallocate, "duplicate": duplicate}
result = CASES[CASE]()
if asyncio.iscoroutine(result):
    asyncio.run(result)
