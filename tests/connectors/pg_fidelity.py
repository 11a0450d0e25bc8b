"""Issue #36: what a client library sees through the router must be what it sees from the server.
Usage: pg_fidelity.py CASE HOST PORT DATABASE SUPERUSER_PORT. Connects as app/app to HOST:PORT/
DATABASE (the router or the server itself) and, for the cases that terminate a server process, as
the trusted superuser `postgres` to the server on SUPERUSER_PORT. Prints one line per observation,
so a run through the router can be compared line by line with a run against the server.

Under transaction pooling a second client `b` takes the connection the first one used last (the
pool lends its warmest idle connection), so the first one's next round trip runs on another
server connection; against the server itself `b` changes nothing."""
import asyncio
import sys
import time

CASE, HOST, PORT, DATABASE, SU_PORT = sys.argv[1:6]
DSN = f"host={HOST} port={PORT} user=app password=app dbname={DATABASE}"
SU_DSN = f"host={HOST} port={SU_PORT} user=postgres dbname=postgres"


def first_line(ex):
    return f"{type(ex).__name__}: {str(ex).splitlines()[0]}"


def psycopg_execute():
    """SQL EXECUTE of a protocol-level statement on every route its text can take."""
    import psycopg
    a = psycopg.connect(DSN, autocommit=True)
    b = psycopg.connect(DSN, autocommit=True)
    a.pgconn.prepare(b"s1", b"select $1::int * 2 as doubled")

    def show(route, run):
        try:
            cur = run()
            print(route, [d.name for d in cur.description], cur.fetchall())
        except psycopg.Error as ex:
            print(route, first_line(ex))

    def elsewhere(run):
        b.execute("BEGIN")
        b.execute("select 1")
        try:
            return run()
        finally:
            b.execute("COMMIT")

    show("unnamed Parse", lambda: a.execute("EXECUTE s1(21)"))
    show("named Parse", lambda: a.execute("EXECUTE s1(21)", prepare=True))
    show("named Parse, other connection", lambda: elsewhere(lambda: a.execute("EXECUTE s1(22)", prepare=True)))
    with a.transaction():
        show("named Parse in a transaction", lambda: a.execute("EXECUTE s1(23)", prepare=True))
    c1, c2 = a.cursor(), a.cursor()
    try:
        with a.pipeline():
            c1.execute("EXECUTE s1(1)", prepare=True)
            c2.execute("EXECUTE s1(2)")
        show("pipeline, named", lambda: c1)
        show("pipeline, unnamed", lambda: c2)
    except psycopg.Error as ex:
        print("pipeline", first_line(ex))
    r = a.pgconn.exec_(b"select 0 as zero; EXECUTE s1(4)")
    print("simple, two statements", r.fname(0), r.get_value(0, 0), r.error_message)
    r = elsewhere(lambda: a.pgconn.exec_(b"EXECUTE s1(5)"))
    print("simple, other connection", r.fname(0), r.get_value(0, 0), r.error_message)


async def asyncpg_main():
    import asyncpg
    connect = dict(host=HOST, port=int(PORT), user="app", password="app", database=DATABASE)
    a = await asyncpg.connect(**connect)
    b = await asyncpg.connect(**connect)
    ps = await a.prepare("select $1::int * 2 as doubled")  # kept: asyncpg closes a dropped one
    name = ps.get_name()
    # asyncpg's statement cache prepares this text as a named statement and describes it: the
    # row type it decodes with is the one the server gave at that Parse.
    for arg in (21, 5):
        try:
            print("cached", dict(await a.fetchrow(f"EXECUTE {name}({arg})")))
        except asyncpg.PostgresError as ex:
            print("cached", first_line(ex))
    async with b.transaction():
        await b.fetchval("select 1")
        try:
            print("other connection", dict(await a.fetchrow(f"EXECUTE {name}(6)")))
        except asyncpg.PostgresError as ex:
            print("other connection", first_line(ex))
    async with a.transaction():
        print("in a transaction", await a.fetchval(f"EXECUTE {name}(7)"))


def asyncpg_execute():
    asyncio.run(asyncpg_main())


def psycopg_unnamed():
    """The unnamed statement across round trips (psql's \\gdesc: Parse + Sync, Describe + Sync)."""
    import psycopg
    from psycopg import pq
    a = psycopg.connect(DSN, autocommit=True)
    b = psycopg.connect(DSN, autocommit=True)

    def result(what, r):
        if r.status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
            fields = [r.fname(i).decode() for i in range(r.nfields)]
            rows = [r.get_value(0, i) for i in range(r.nfields)] if r.ntuples else []
            print(what, "fields", fields, rows)
        else:
            print(what, pq.ExecStatus(r.status).name, r.error_message.decode().strip())

    def elsewhere(run):
        b.execute("BEGIN")
        b.execute("select 1")
        try:
            return run()
        finally:
            b.execute("COMMIT")

    result("prepare", a.pgconn.prepare(b"", b"select 1::int as one, 'x'::text as two"))
    result("describe, other connection", elsewhere(lambda: a.pgconn.describe_prepared(b"")))
    result("execute, other connection", elsewhere(lambda: a.pgconn.exec_prepared(b"", [])))
    result("describe, same connection", a.pgconn.describe_prepared(b""))
    # A simple query drops the client's unnamed statement; another client's is not its own.
    a.pgconn.exec_(b"select 1")
    result("b prepares", b.pgconn.prepare(b"", b"select 'not yours' as secret"))
    result("describe after a simple query", a.pgconn.describe_prepared(b""))
    result("failed prepare", a.pgconn.prepare(b"", b"select no_such_column"))
    result("describe after a failed prepare", elsewhere(lambda: a.pgconn.describe_prepared(b"")))


def psycopg_unnamed_long():
    """An unnamed statement longer than the router keeps (64 KiB), used on another connection."""
    import psycopg
    from psycopg import pq
    a = psycopg.connect(DSN, autocommit=True)
    b = psycopg.connect(DSN, autocommit=True)
    text = b"select 1 as one /* " + b"x" * (64 * 1024) + b" */"
    print("prepare", pq.ExecStatus(a.pgconn.prepare(b"", text).status).name)
    b.execute("BEGIN")
    b.execute("select 1")
    d = a.pgconn.describe_prepared(b"")
    print("describe, other connection", pq.ExecStatus(d.status).name, d.error_field(pq.DiagnosticField.SQLSTATE))
    b.execute("COMMIT")
    print("next", a.execute("select 2").fetchone()[0])


def psycopg_terminate():
    """pg_terminate_backend of the process a statement runs in, with and without a transaction."""
    import psycopg
    for autocommit in (True, False):
        c = psycopg.connect(DSN, autocommit=autocommit)
        try:
            c.execute("select pg_terminate_backend(pg_backend_pid())")
            print(f"autocommit={autocommit}: no error")
        except psycopg.Error as ex:
            print(f"autocommit={autocommit}: {first_line(ex)}")
        print("   closed:", c.closed)
        if not c.closed:
            print("   next:", c.execute("select 1").fetchone()[0])
        c.close()


def psycopg_terminate_idle():
    """The server process of an idle client is terminated by someone else."""
    import psycopg
    c = psycopg.connect(DSN, autocommit=True)
    pid = c.execute("select pg_backend_pid()").fetchone()[0]
    su = psycopg.connect(SU_DSN, autocommit=True)
    su.execute("select pg_terminate_backend(%s)", [pid])
    while su.execute("select count(*) from pg_stat_activity where pid = %s", [pid]).fetchone()[0]:
        time.sleep(0.02)
    try:
        print("after terminate:", c.execute("select 1").fetchone()[0])
    except psycopg.Error as ex:
        print("after terminate:", first_line(ex))
    print("closed:", c.closed)


globals()[CASE]()
