"""Issue #34's bridged matrix, the write kinds: PyMySQL on PostgreSQL pools (a MySQL client
through the bridge), replay paused on the standby. Usage:
causal_bridged_kinds.py PORT USER PASSWORD DATABASE TABLE FIRST_ID
For every path x write kind a writer connection writes a row, then
  - reads it back itself (`own`);
  - reads its token with SHOW and a fresh connection SETs it, then reads (`show_set`);
  - a fresh connection passes the token as connection attribute `querypilot.causal_token`
    (the MySQL handshake's only startup values), then reads (`attr`).
Paths: `text` (each statement a query of its own) and `multi` (CLIENT_MULTI_STATEMENTS: the
write's statements in one text with filler SELECTs before, around or after them: `first`,
`middle`, `last`). A transaction that only read leaves no position (the server said it has
no transaction id): its session reads on the standby after it (`readonly_tx COUNT SERVER
TOKEN`). Prints `PATH KIND ROUTE COUNT SERVER` per read (SERVER `standby` when
`pg_stat_wal_receiver` has a row there), then the lines of the refusals: LOAD DATA LOCAL
INFILE and XA (`refused KIND ERRNO ROWS`), the token named inside a multi-statement text
(`token_multi WHERE ERRNO ROWS`: nothing of the text ran) and an invalid token as connection
attribute (`attr_bad ERRNO`)."""
import os
import sys
import tempfile

import pymysql
from pymysql.constants import CLIENT

PORT, USER, PASSWORD, DB, T = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
NEXT = [int(sys.argv[6])]


def next_id():
    NEXT[0] += 1
    return NEXT[0]


def conn(token=None):
    c = pymysql.connect(host="127.0.0.1", port=PORT, user=USER, password=PASSWORD, database=DB, autocommit=True,
                        client_flag=CLIENT.MULTI_STATEMENTS, local_infile=True, defer_connect=True)
    if token is not None:
        # PyMySQL has no public way to add an attribute: its dict is sent as it is at connect.
        c._connect_attrs["querypilot.causal_token"] = token
    c.connect()
    return c


def writes(kind, i):
    """The statements of one write of `kind` (row `i`; the view's row is the one it returns)."""
    return {
        "plain": [f"INSERT INTO {T} VALUES ({i})"],
        "cte": [f"WITH x AS (INSERT INTO {T} VALUES ({i}) RETURNING id) SELECT id FROM x"],
        "volatile": [f"SELECT {T}_w({i})"],
        # STABLE, calling a VOLATILE function that inserts: in a transaction and alone.
        "stable": ["BEGIN", f"SELECT {T}_s({i})", "COMMIT"],
        "stable_auto": [f"SELECT {T}_s({i})"],
        # A plain read of a view whose column calls the inserting function: the parse sees a
        # table read (in autocommit it would run on the standby and fail there).
        "view": ["BEGIN", f"SELECT id FROM {T}_v", "COMMIT"],
        # The same in the transaction `autocommit = 0` opens (emulated: the router sends BEGIN).
        "view_ac0": ["SET autocommit = 0", f"SELECT id FROM {T}_v", "COMMIT", "SET autocommit = 1"],
        "trigger": [f"INSERT INTO {T}_log VALUES ({i})"],
        "do": [f"DO 'BEGIN INSERT INTO {T} VALUES ({i}); END'"],
        "call": [f"CALL {T}_p({i})"],
        "2pc": ["BEGIN", f"INSERT INTO {T} VALUES ({i})", f"PREPARE TRANSACTION '{T}_{i}'"],
    }[kind]


KINDS = ["plain", "cte", "volatile", "stable", "stable_auto", "view", "view_ac0", "trigger", "do", "call", "2pc"]
FILLER = "SELECT 0 AS filler"


def run_all(cur, sql):
    """Runs `sql` (one or more statements); the `id` column's value of any result set."""
    cur.execute(sql)
    found = None
    while True:
        if cur.description and cur.description[0][0] == "id":
            found = cur.fetchone()[0]
        if not cur.nextset():
            return found


def write(c, path, kind, i):
    cur = c.cursor()
    stmts = writes(kind, i)
    if path == "text":
        texts = stmts
    else:
        before = {"first": 0, "middle": 1, "last": 2}[path.split("_")[1]]
        texts = ["; ".join([FILLER] * before + stmts + [FILLER] * (2 - before))]
    returned = None
    for sql in texts:
        got = run_all(cur, sql)
        returned = got if got is not None else returned
    if kind == "2pc":
        cur.execute(f"COMMIT PREPARED '{T}_{i}'")
    return returned if kind.startswith("view") else i


def read(c, i):
    cur = c.cursor()
    cur.execute(f"SELECT COUNT(*), (SELECT COUNT(*) FROM pg_stat_wal_receiver) FROM {T} WHERE id = {i}")
    count, receivers = cur.fetchone()
    return f"{count} {'standby' if int(receivers) == 1 else 'primary'}"


def token_of(c):
    cur = c.cursor()
    cur.execute("SHOW querypilot.causal_token")
    return cur.fetchone()[0]


def matrix():
    for path in ["text", "multi_first", "multi_middle", "multi_last"]:
        for kind in KINDS:
            if kind == "view_ac0" and path != "text":
                continue  # `SET autocommit` is answered by the router only as a query of its own
            label = f"{path} {kind}"
            try:
                w = conn()
                i = write(w, path, kind, next_id())
                print(label, "own", read(w, i))
                token = token_of(w)
                o = conn()
                o.cursor().execute(f"SET querypilot.causal_token = '{token}'")
                print(label, "show_set", read(o, i))
                print(label, "attr", read(conn(token), i))
            except Exception as e:
                print(label, "ERROR", type(e).__name__, e)


def errno(e):
    return e.args[0] if e.args else "?"


def read_only_transaction():
    c = conn()
    cur = c.cursor()
    for sql in ["BEGIN", f"SELECT COUNT(*) FROM {T}", "COMMIT"]:
        cur.execute(sql)
    print("readonly_tx", read(c, next_id()), token_of(c) or "-")


def refusals():
    c = conn()
    cur = c.cursor()
    i = next_id()
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write(f"{i}\n")
    try:
        cur.execute(f"LOAD DATA LOCAL INFILE '{f.name}' INTO TABLE {T}")
        print("refused copy none", read(c, i))
    except pymysql.MySQLError as e:
        print("refused copy", errno(e), read(c, i))
    os.unlink(f.name)
    i = next_id()
    try:
        for sql in [f"XA START 'x{i}'", f"INSERT INTO {T} VALUES ({i})", f"XA END 'x{i}'", f"XA PREPARE 'x{i}'",
                    f"XA COMMIT 'x{i}'"]:
            cur.execute(sql)
        print("refused xa none", read(c, i))
    except pymysql.MySQLError as e:
        print("refused xa", errno(e), read(conn(), i))
    # The token named in any position of a multi-statement text: refused whole, never sent.
    w = conn()
    w.cursor().execute(f"INSERT INTO {T} VALUES ({next_id()})")
    token = token_of(w)
    for where, text in [("first", "SET querypilot.causal_token = '{}'; INSERT INTO {} VALUES ({})"),
                        ("middle", "SELECT 1; SET querypilot.causal_token = '{}'; INSERT INTO {} VALUES ({})"),
                        ("last", "INSERT INTO {1} VALUES ({2}); SET querypilot.causal_token = '{0}'"),
                        ("show", "INSERT INTO {1} VALUES ({2}); SHOW querypilot.causal_token")]:
        i = next_id()
        o = conn()
        try:
            run_all(o.cursor(), text.format(token, T, i))
            print("token_multi", where, "none", token_of(o) or "-")
        except pymysql.MySQLError as e:
            # Nothing ran (the INSERT is missing on the primary too) and the session took no token.
            print("token_multi", where, errno(e), read(conn(token), i), token_of(o) or "-")
    try:
        conn("nonsense")
        print("attr_bad none")
    except pymysql.MySQLError as e:
        print("attr_bad", errno(e))


matrix()
read_only_transaction()
refusals()
