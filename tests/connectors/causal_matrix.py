"""The causal-read matrix of issue #34 for PostgreSQL, data-driven. Usage:
causal_matrix.py CLIENT HOST PORT USER PASSWORD DATABASE TABLE FIRST_ID
CLIENT: psycopg (paths simple, unnamed, named, pipeline, multi), asyncpg (simple, named,
multi), psql (simple, multi). For every path x token route x write kind, a writer connection
writes a fresh row through the router, then
  - reads it back itself by the same path (read-your-writes on the session);
  - hands its token to a fresh reader connection — SET by the same path (`set`), read with
    SHOW by the same path and SET on the reader (`show_set`), or as the reader's startup
    parameter (`startup`) — which reads the row by the same path.
With replay paused on the standby, a read that misses the row is stale. Prints one line per
case: `CLIENT PATH TOKEN KIND ok` (or `STALE ...`, `ERROR ...`) and the recovery state of the
reads (`f`: the primary)."""
import asyncio
import subprocess
import sys

CLIENT, HOST, PORT, USER, PASSWORD, DATABASE, TABLE, FIRST = sys.argv[1:9]
NEXT = [int(FIRST)]


def next_id():
    NEXT[0] += 1
    return NEXT[0]


def writes(kind, i):
    """The statements of one write of `kind` (row id `i`): (sql, in a transaction of its own)."""
    t = TABLE
    return {
        "plain": [f"INSERT INTO {t} VALUES ({i})"],
        "cte": [f"WITH x AS (INSERT INTO {t} VALUES ({i}) RETURNING id) SELECT id FROM x"],
        "volatile": [f"SELECT {t}_w({i})"],
        # The write is unseen by the parse: inside a transaction, the router must not trust it.
        "stable": ["BEGIN", f"SELECT {t}_s({i})", "COMMIT"],
        "trigger": [f"INSERT INTO {t}_log VALUES ({i})"],
        "do": [f"DO $$ BEGIN INSERT INTO {t} VALUES ({i}); END $$"],
        "call": [f"CALL {t}_p({i})"],
        "copy": None,  # COPY FROM STDIN, driven by each client
        "2pc": ["BEGIN", f"INSERT INTO {t} VALUES ({i})", f"PREPARE TRANSACTION '{t}_{i}'", f"COMMIT PREPARED '{t}_{i}'"],
    }[kind]


KINDS = ["plain", "cte", "volatile", "stable", "trigger", "do", "call", "copy", "2pc"]
READ = f"SELECT count(*), pg_is_in_recovery() FROM {TABLE} WHERE id = "
TOKENS = ["set", "show_set", "startup"]


def verdict(label, count, recovery):
    return f"{label} ok {'t' if recovery else 'f'}" if count == 1 else f"{label} STALE {'t' if recovery else 'f'}"


# ---- psycopg 3 -------------------------------------------------------------------------------

def pg_connect(token=None):
    import psycopg
    options = f"-c querypilot.causal_token={token}" if token else None
    kw = {"options": options} if options else {}
    return psycopg.connect(host=HOST, port=PORT, user=USER, password=PASSWORD, dbname=DATABASE, autocommit=True, **kw)


def pg_run(c, path, sql):
    """Runs one statement by `path`; returns the first row, if any."""
    if path == "simple":
        cur = c.execute(sql)
    elif path == "unnamed":
        cur = c.execute(sql, binary=True, prepare=False)  # binary: the extended protocol without parameters
    elif path == "named":
        cur = c.execute(sql, prepare=True)
    elif path == "multi":
        cur = c.execute(f"SELECT 1; {sql}")
        while cur.nextset():
            pass
    else:  # pipeline
        with c.pipeline():
            cur = c.execute(sql)
    try:
        return cur.fetchone()
    except Exception:
        return None


def pg_write(c, path, kind, i):
    if kind == "copy":
        with c.cursor().copy(f"COPY {TABLE} (id) FROM STDIN") as cp:
            cp.write_row((i,))
        return
    if path == "pipeline":
        with c.pipeline():
            for sql in writes(kind, i):
                c.execute(sql)
        return
    if path == "multi":
        # COMMIT PREPARED cannot run inside the text's implicit block.
        stmts = writes(kind, i)
        c.execute("; ".join(stmts[:3] if kind == "2pc" else stmts))
        if kind == "2pc":
            c.execute(stmts[3])
        return
    for sql in writes(kind, i):
        pg_run(c, path, sql)


def pg_read(c, path, i):
    if path == "multi":
        cur = c.execute(f"{READ}{i}; SELECT 1")
        return cur.fetchone()
    return pg_run(c, path, f"{READ}{i}")


def token_path(path):
    # In a multi-statement text the token is refused by design (0A000): its own statement.
    return "simple" if path == "multi" else path


def psycopg_matrix():
    paths = ["simple", "unnamed", "named", "pipeline", "multi"]
    for path in paths:
        for token in TOKENS:
            for kind in KINDS:
                label = f"psycopg {path} {token} {kind}"
                try:
                    i = next_id()
                    with pg_connect() as w:
                        pg_write(w, path, kind, i)
                        own = pg_read(w, path, i)
                        tok = pg_run(w, token_path(path) if token == "show_set" else "simple", "SHOW querypilot.causal_token")[0]
                    if token == "startup":
                        with pg_connect(tok) as r:
                            got = pg_read(r, path, i)
                    else:
                        with pg_connect() as r:
                            pg_run(r, token_path(path) if token == "set" else "simple", f"SET querypilot.causal_token = '{tok}'")
                            got = pg_read(r, path, i)
                    print(verdict(label + " own", *own))
                    print(verdict(label, *got))
                except Exception as e:
                    print(f"{label} ERROR {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


# ---- asyncpg ---------------------------------------------------------------------------------

async def asyncpg_matrix():
    import asyncpg

    async def connect(token=None):
        settings = {"querypilot.causal_token": token} if token else None
        return await asyncpg.connect(host=HOST, port=int(PORT), user=USER, password=PASSWORD, database=DATABASE,
                                     server_settings=settings)

    async def write(c, path, kind, i):
        if kind == "copy":
            # copy_to_table: copy_records_to_table first describes the table in a batch of its
            # own, which a read/write split sends to the standby (a limit noted in #34).
            import io
            await c.copy_to_table(TABLE, source=io.BytesIO(f"{i}\n".encode()), columns=["id"])
            return
        stmts = writes(kind, i)
        if path == "multi" and kind != "2pc":
            await c.execute("; ".join(stmts))
            return
        for sql in stmts:
            if path == "named" and not sql.startswith(("BEGIN", "COMMIT", "PREPARE", "DO")):
                await c.fetch(sql)  # a prepared (named) statement
            else:
                await c.execute(sql)  # the simple protocol

    async def read(c, i):
        r = await c.fetchrow(READ + "$1", i)
        return r[0], r[1]

    for path in ["simple", "named", "multi"]:
        for token in TOKENS:
            for kind in KINDS:
                label = f"asyncpg {path} {token} {kind}"
                try:
                    i = next_id()
                    w = await connect()
                    await write(w, path, kind, i)
                    own = await read(w, i)
                    tok = await w.fetchval("SHOW querypilot.causal_token")
                    await w.close()
                    r = await connect(tok if token == "startup" else None)
                    if token != "startup":
                        if path == "named":
                            await (await r.prepare(f"SET querypilot.causal_token = '{tok}'")).fetch()
                        else:
                            await r.execute(f"SET querypilot.causal_token = '{tok}'")
                    got = await read(r, i)
                    await r.close()
                    print(verdict(label + " own", *own))
                    print(verdict(label, *got))
                except Exception as e:
                    print(f"{label} ERROR {type(e).__name__}: {e}")


# ---- psql ------------------------------------------------------------------------------------

def psql(commands, token=None, stdin=""):
    env = {"PGPASSWORD": PASSWORD, "PATH": "/usr/bin:/bin"}
    if token:
        env["PGOPTIONS"] = f"-c querypilot.causal_token={token}"
    args = ["psql", "-X", "-Atq", "-v", "ON_ERROR_STOP=1", "-h", HOST, "-p", PORT, "-U", USER, "-d", DATABASE]
    for c in commands:
        args += ["-c", c]
    out = subprocess.run(args, input=stdin, capture_output=True, text=True, env=env, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return out.stdout.strip().splitlines()


def psql_matrix():
    for path in ["simple", "multi"]:
        for token in TOKENS:
            for kind in KINDS:
                label = f"psql {path} {token} {kind}"
                try:
                    i = next_id()
                    read = f"{READ}{i}"
                    if kind == "copy":
                        cmds, stdin = [f"COPY {TABLE} (id) FROM STDIN"], f"{i}\n\\.\n"
                    elif path == "multi":
                        # COMMIT PREPARED cannot run inside the text's implicit block.
                        stmts = writes(kind, i)
                        cmds = ["; ".join(stmts[:3]), stmts[3]] if kind == "2pc" else ["; ".join(stmts)]
                        stdin = ""
                    else:
                        cmds, stdin = writes(kind, i), ""
                    # One psql session: the writes, its own read, its token.
                    out = psql(cmds + [read, "SHOW querypilot.causal_token"], stdin=stdin)
                    own, tok = out[-2], out[-1]
                    if token == "startup":
                        got = psql([read], token=tok)[-1]
                    else:
                        got = psql([f"SET querypilot.causal_token = '{tok}'", read])[-1]
                    for name, line in [(label + " own", own), (label, got)]:
                        count, recovery = line.split("|")
                        print(verdict(name, int(count), recovery == "t"))
                except Exception as e:
                    print(f"{label} ERROR {type(e).__name__}: {e}")


if CLIENT == "psycopg":
    psycopg_matrix()
elif CLIENT == "asyncpg":
    asyncio.run(asyncpg_matrix())
else:
    psql_matrix()
