"""PyMySQL cells of the MariaDB causal matrix (issue #34) for an autocommit `SELECT f(n)` of a
stored function that inserts (`TABLE_f`). Its result set ends in an EOF packet, which carries no
session state: the commit's GTID is owed by the connection, and the router collects it as the
connection goes back to the pool, so SHOW querypilot.causal_token answers that position and the
writer's reads wait for it (on the primary while the replica is stopped).
Usage: pymysql_causal_function.py PORT USER PASSWORD DATABASE TABLE FIRST_ID.
Runs in two stages. First, for each path (a text query, `SELECT 1; SELECT f(n)` as one
multi-statement text, `cursor.execute` with the id as parameter) it opens two writers, the second
of which inserts a row at once (an earlier position); it prints `ready` and waits for a line on
stdin: meanwhile the replica applies the earlier rows and its SQL thread is stopped. Then each
writer shows its token (the older one, if any), writes row n through the function, reads it back,
shows its token again and hands it to a second connection by SET (which read row n before, on the
stopped replica) and to a third as connection attribute `querypilot.causal_token`. Prints
`cell=PATH/earlier|first token0=T writer=R token=T before=R set=R attr=R`, each R `COUNT/@@server_id`
or `error:ERRNO`."""
import sys

import pymysql
from pymysql.constants import CLIENT

port, user, password, db, t, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])


def conn(token=None):
    c = pymysql.connect(host="127.0.0.1", port=port, user=user, password=password, database=db, autocommit=True,
                        client_flag=CLIENT.MULTI_STATEMENTS, defer_connect=True)
    if token is not None:
        c._connect_attrs["querypilot.causal_token"] = token
    c.connect()
    return c


def outcome(run):
    """`run()`'s result, or the error a refused statement (or login) got."""
    try:
        return run()
    except pymysql.MySQLError as e:
        return f"error:{e.args[0]}"


def read(c, i):
    cur = c.cursor()
    cur.execute(f"SELECT COUNT(*), @@server_id FROM {t} WHERE id = {i}")
    return "%d/%d" % cur.fetchone()


def show(c):
    cur = c.cursor()
    cur.execute("SHOW querypilot.causal_token")
    return cur.fetchone()[0]


def write(c, path, i):
    cur = c.cursor()
    if path == "text":
        cur.execute(f"SELECT {t}_f({i})")
    elif path == "multi":
        cur.execute(f"SELECT 1; SELECT {t}_f({i})")
    else:
        cur.execute(f"SELECT {t}_f(%s)", (i,))
    while cur.nextset():
        pass


def set_token(c, token):
    c.cursor().execute(f"SET querypilot.causal_token = '{token}'")


writers = []
for path in ["text", "multi", "params"]:
    for earlier in [False, True]:
        w = conn()
        if earlier:
            n += 1
            w.cursor().execute(f"INSERT INTO {t} VALUES ({n})")
        writers.append((f"{path}/{'earlier' if earlier else 'first'}", path, w))
print("ready", flush=True)
sys.stdin.readline()
for cell, path, w in writers:
    n += 1
    token0 = show(w)
    write(w, path, n)
    mine = read(w, n)
    token = show(w)
    o = conn()
    before = read(o, n)
    theirs = outcome(lambda: set_token(o, token) or read(o, n))
    attr = outcome(lambda: read(conn(token), n))
    print(f"cell={cell} token0={token0} writer={mine} token={token} before={before} set={theirs} attr={attr}",
          flush=True)
