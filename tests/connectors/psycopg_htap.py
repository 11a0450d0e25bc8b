# psycopg 3 through the router's PostgreSQL listener (#24): a statement that a translation rule
# sends to a MySQL pool, executed unprepared (extended protocol, unnamed statement), prepared
# (named statement) and with binary results, between statements that run on PostgreSQL; then the
# same statement inside a PostgreSQL transaction, which the router refuses with 25001; in pipeline
# mode, two such statements run there, and one of each pool in one pipeline is refused (25001).
#   python3 psycopg_htap.py DSN QUERY       (QUERY holds one %s: the row id)
# Prints one line per check; the Rust test compares them.
import sys

import psycopg

dsn, query = sys.argv[1], sys.argv[2]
with psycopg.connect(dsn, autocommit=True) as c:
    print("recovery", c.execute("SELECT pg_is_in_recovery()").fetchone()[0])
    for prepare in (False, True):
        for row_id in (1, 2):
            print("prepare" if prepare else "plain", repr(c.execute(query, (row_id,), prepare=prepare).fetchone()))
    with c.cursor(binary=True) as cur:
        for row_id in (1, 2):
            print("binary", repr(cur.execute(query, (row_id,)).fetchone()))
    print("recovery", c.execute("SELECT pg_is_in_recovery()").fetchone()[0])
    with c.pipeline():
        cursors = [c.execute(query, (row_id,)) for row_id in (1, 2)]
    print("pipeline", [cur.fetchone()[0] for cur in cursors])
    for first, second in (((query, (1,)), ("SELECT pg_is_in_recovery()", None)), (("SELECT 7", None), (query, (1,)))):
        try:
            with c.pipeline():
                cur = c.execute(*first)
                c.execute(*second)
            print("mixed pipeline not refused")
        except psycopg.Error as e:
            print("mixed pipeline refused", e.sqlstate, cur.fetchone()[0])
    print("recovery", c.execute("SELECT pg_is_in_recovery()").fetchone()[0])
    c.autocommit = False
    c.execute("SELECT 1")
    try:
        c.execute(query, (1,))
        print("not refused")
    except psycopg.Error as e:
        print("refused", e.sqlstate)
    c.rollback()
