"""asyncpg against the seed's HTAP translation with the array as `$1` (#35). asyncpg describes
every statement before it binds (Parse + Describe, then Bind with values in the formats the
description calls for: text in binary), through `prepare` and through `fetch`'s statement
cache. Prints the description (`described PARAM_TYPES | COLUMN:TYPE...`), then per value
`fetch|prepared VALUE ids...` (sorted) or `... error SQLSTATE`, then `after` with the next
statement's answer.

usage: asyncpg_htap_json.py DSN VALUE...
"""
import asyncio
import sys

import asyncpg

SQL = "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, $1)"


async def main():
    c = await asyncpg.connect(sys.argv[1])
    stmt = await c.prepare(SQL)
    params = [t.name for t in stmt.get_parameters()]
    columns = [f"{a.name}:{a.type.name}" for a in stmt.get_attributes()]
    print("described", *params, "|", *columns)
    for value in sys.argv[2:]:
        for how in ("fetch", "prepared"):
            try:
                rows = await (c.fetch(SQL, value) if how == "fetch" else stmt.fetch(value))
                print(how, value, "ids", *sorted(r[0] for r in rows))
            except asyncpg.PostgresError as e:
                print(how, value, "error", e.sqlstate)
    print("after", await c.fetchval("SELECT 1"))
    await c.close()


asyncio.run(main())
