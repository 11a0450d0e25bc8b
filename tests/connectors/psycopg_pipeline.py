# psycopg 3 pipeline mode (libpq pipeline) through the router; driven by tests/it/pg_pipeline.rs.
# usage: psycopg_pipeline.py MODE DSN [TABLE]
#   abort  an error mid-pipeline, more statements, then Sync: every result as from the server
#   leave  an error mid-pipeline, then the client vanishes without Sync
#   route  SELECT, UPDATE, SELECT of TABLE in one pipeline (read/write split): where each ran
#   reads  two SELECTs in one pipeline: both on the standby
#   refused  INSERT fetched (a Flush), then a statement a rule rejects, then Sync
#   flush  SELECT fetched (a Flush), then UPDATE in the same pipeline: refused or on the primary
import os
import signal
import sys

import psycopg
import psycopg.errors as e

mode, dsn = sys.argv[1], sys.argv[2]
table = sys.argv[3] if len(sys.argv) > 3 else None
signal.alarm(20)  # a hang ends the script with an error instead of blocking the test
conn = psycopg.connect(dsn, autocommit=True)
if mode == "abort":
    with conn.pipeline() as p:
        c1 = conn.execute("select 1")
        try:
            conn.execute("select * from qp_no_such_table").fetchone()
        except e.UndefinedTable:
            print("undefined table")
        try:
            conn.execute("select 'aborted'").fetchone()
        except e.PipelineAborted:
            print("pipeline aborted")
        p.sync()
        c2 = conn.execute("select 2")
    print(c1.fetchone(), c2.fetchone())
    print(conn.execute("select 3").fetchone())
elif mode == "leave":
    p = conn.pipeline()
    p.__enter__()
    conn.execute("select 1")
    try:
        conn.execute("select * from qp_no_such_table").fetchone()
    except e.UndefinedTable:
        print("undefined table")
    conn.execute("select 'never synced'")
    sys.stdout.flush()
    os._exit(0)
elif mode == "route":
    with conn.pipeline():
        c1 = conn.execute(f"select pg_is_in_recovery(), v from {table} where id = 1")
        c2 = conn.execute(f"update {table} set v = v + 1 where id = 1 returning pg_is_in_recovery(), v")
        c3 = conn.execute(f"select pg_is_in_recovery(), v from {table} where id = 1")
    print(c1.fetchone(), c2.fetchone(), c3.fetchone())
elif mode == "reads":
    with conn.pipeline():
        c1 = conn.execute(f"select pg_is_in_recovery(), v from {table} where id = 1")
        c2 = conn.execute(f"select pg_is_in_recovery(), count(*) from {table}")
    print(c1.fetchone(), c2.fetchone())
elif mode == "flush":
    with conn.pipeline() as p:
        first = conn.execute(f"select pg_is_in_recovery(), v from {table} where id = 1").fetchone()
        try:
            row = conn.execute(f"update {table} set v = v + 1 where id = 1 returning pg_is_in_recovery()").fetchone()
            print("update ran, in recovery:", row[0])
        except psycopg.Error as err:
            print("update refused", err.sqlstate, str(err).splitlines()[0])
        try:
            p.sync()
        except psycopg.Error:
            pass
    print("first in recovery:", first[0])
    print("after:", conn.execute("select 1").fetchone())
elif mode == "refused":
    with conn.pipeline() as p:
        conn.execute(f"insert into {table} values (2, 0) returning id").fetchone()
        try:
            conn.execute(f"drop table {table}").fetchone()
        except psycopg.Error as err:
            print("refused", err.sqlstate)
        try:
            p.sync()
        except psycopg.Error:
            pass
    print("rows", conn.execute(f"select count(*) from {table} where id = 2").fetchone())
else:
    sys.exit(f"unknown mode {mode}")
