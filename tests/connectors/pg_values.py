"""PostgreSQL clients' values that quoting can get wrong (#33). DRIVER is one of
`psycopg2` (interpolates on the client, `E''` when told standard_conforming_strings=off),
`psycopg-client` (psycopg 3's ClientCursor, interpolating by the same setting), `psycopg`
(server-side parameters) or `asyncpg` (server-side parameters; literals written by hand).

Usage: pg_values.py DSN TABLE DRIVER. Prints `backend NAME`, then one line per check; the Rust
test compares them with what PostgreSQL itself prints.
"""
import asyncio
import sys

dsn, table, driver = sys.argv[1:4]
VALUES = [
    "'", "\\", "\\'", "\\\\'", "''", "%", "_", "a%b_c\\%\\_", "ünïcödé ✓ 🐘 日本",
    "nomatch\\' OR id = 22 --", "x'); DELETE FROM " + table + "; --",
    "\\'; UPDATE " + table + " SET v = 'pwned' -- x", "\"double\" `tick`", "$$dollar$$ $q$",
    "/* c */ #h -- d", "\n\r\t\x1a\b end", "?", "$1",
]
PAYLOADS = ["nomatch\\' OR id = 22 --", "nomatch\\' OR id = 22 -- ", "\\' OR id = 22 #"]
# Literals as a person writes them: standard strings, escape strings, dollar quotes.
LITERALS = [("'it''s'", "it's"), ("'a\\b'", "a\\b"), ("E'it\\'s \\\\ \\n'", "it's \\ \n"),
            ("E'\\u00e9\\x41\\101'", "éAA"), ("$$a'b\\$$", "a'b\\"), ("U&'d\\0061t'", "dat")]


async def run(execute, fetch):
    """Coroutines `execute(sql, params)` (the affected row count) and `fetch(sql, params)` (the rows)."""
    version = (await fetch("SELECT version()", ()))[0][0]
    print("backend", "postgres" if version.startswith("PostgreSQL") else "mariadb")
    await execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v TEXT)", ())
    await execute(f"INSERT INTO {table} (id, v) VALUES (22, 'victim')", ())
    for payload in PAYLOADS:
        print("injection updated", await execute(f"UPDATE {table} SET v = 'X' WHERE v = %s", (payload,)))
    for i, v in enumerate(VALUES, 1):
        # The id inline: the bridge types MySQL parameters as text, which asyncpg then insists on.
        print("insert", i, await execute(f"INSERT INTO {table} (id, v) VALUES ({i}, %s)", (v,)))
    for i, v in await fetch(f"SELECT id, v FROM {table} ORDER BY id", ()):
        want = VALUES[i - 1] if i <= len(VALUES) else "victim"
        print("value", i, "same" if v == want else "differs " + repr(v))
    for i, v in enumerate(VALUES, 1):
        print("found", i, [r[0] for r in await fetch(f"SELECT id FROM {table} WHERE v = %s ORDER BY id", (v,))])
    for text, want in LITERALS:
        got = (await fetch(f"SELECT {text}", ()))[0][0]
        print("literal", text, "same" if got == want else "differs " + repr(got))
    print("updated", await execute(f"UPDATE {table} SET v = %s WHERE v IN (%s, %s)", ("changed", "\\", "\\'")))
    await execute(f"DROP TABLE {table}", ())
    try:
        await fetch("SELECT E'a\\000b'", ())
        print("nul accepted")
    except Exception as e:  # each driver's own error class
        print("nul refused", getattr(e, "sqlstate", None) or getattr(e, "pgcode", None))
    print("closed")


def sync_driver(cur):
    """`execute` and `fetch` coroutines over a DB-API cursor."""
    async def execute(sql, params):
        cur.execute(sql, params or None)
        return cur.rowcount

    async def fetch(sql, params):
        cur.execute(sql, params or None)
        return cur.fetchall()
    return execute, fetch


def numbered(sql):
    """`%s` placeholders as `$1`, `$2`, … for asyncpg."""
    parts = sql.split("%s")
    return "".join(p + (f"${i}" if i < len(parts) else "") for i, p in enumerate(parts, 1))


async def main():
    if driver == "psycopg2":
        import psycopg2
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        await run(*sync_driver(conn.cursor()))
    elif driver in ("psycopg", "psycopg-client"):
        import psycopg
        conn = psycopg.connect(dsn, autocommit=True)
        # Unnamed statements only: after DDL psycopg would send DEALLOCATE ALL, which the
        # bridge does not emulate.
        conn.prepare_threshold = None
        await run(*sync_driver(psycopg.ClientCursor(conn) if driver == "psycopg-client" else conn.cursor()))
    else:
        import asyncpg
        conn = await asyncpg.connect(dsn)

        async def execute(sql, params):
            status = await conn.execute(numbered(sql), *params)
            tail = status.split()[-1]
            return int(tail) if tail.isdigit() else -1

        async def fetch(sql, params):
            return [tuple(r) for r in await conn.fetch(numbered(sql), *params)]
        await run(execute, fetch)
        await conn.close()
        return
    conn.close()


asyncio.run(main())
