"""PyMySQL: KILL by the ids a client can learn, from a second connection and from itself.

usage: pymysql_kill.py HOST PORT USER PASSWORD DATABASE SERVER_PORT MARKER

PORT is where the clients connect (the router, or the server directly); SERVER_PORT is the
MariaDB server itself, watched to see when a statement runs there. Prints one line per step,
with error numbers but no ids, so that runs through the router and directly compare line by line.
"""
import sys
import threading
import time

import pymysql

host, port, user, password, database, server_port, marker = sys.argv[1:8]
port, server_port = int(port), int(server_port)


def connect(p=port):
    return pymysql.connect(host=host, port=p, user=user, password=password, database=database)


def outcome(run):
    try:
        return "ok %s" % (run(),)
    except pymysql.MySQLError as e:
        return "error %d" % e.args[0]


def wait_running(tag):
    """Until the server runs the statement tagged `tag` (bounded)."""
    watch = connect(server_port)
    sql = ("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE %s "
           "AND INFO NOT LIKE '%%PROCESSLIST%%'")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with watch.cursor() as cur:
            cur.execute(sql, ("%" + tag + "%",))
            if cur.fetchone()[0] == 1:
                watch.close()
                return
        time.sleep(0.02)
    raise SystemExit("the statement %s never ran on the server" % tag)


def sleep_and_kill(victim, killer, label, victim_id):
    """Runs a 30 s SLEEP in `victim`, sends KILL QUERY `victim_id` from `killer`."""
    tag = "%s_%s" % (marker, label.replace(" ", "_").replace("()", ""))
    result = {}

    def run():
        with victim.cursor() as cur:
            cur.execute("SELECT SLEEP(30) AS %s" % tag)
            return cur.fetchone()[0]

    t = threading.Thread(target=lambda: result.setdefault("r", outcome(run)))
    t.start()
    wait_running(tag)
    with killer.cursor() as cur:
        killed = outcome(lambda: cur.execute("KILL QUERY %d" % victim_id))
    print("%s: KILL QUERY %s" % (label, killed))
    if not killed.startswith("ok"):
        # Refused: stop the sleep on the server itself, so the run goes on.
        admin = connect(server_port)
        with admin.cursor() as cur:
            cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE %s "
                        "AND INFO NOT LIKE '%%PROCESSLIST%%'", ("%" + tag + "%",))
            cur.execute("KILL QUERY %d" % cur.fetchone()[0])
        admin.close()
    t.join()
    if killed.startswith("ok"):
        # The server ends a killed SLEEP with 1 when the kill lands while it waits, and with
        # 1317 when it lands just before or after the wait: both mean interrupted, and which
        # one a run sees is a race inside the server (directly as through a router).
        ended = result["r"]
        if ended in ("ok 1", "error 1317"):
            ended = "interrupted"
        print("%s: the sleep ended %s" % (label, ended))


victim = connect()
killer = connect()
with victim.cursor() as cur:
    cur.execute("SELECT CONNECTION_ID()")
    server_id = cur.fetchone()[0]
sleep_and_kill(victim, killer, "thread_id()", victim.thread_id())
sleep_and_kill(victim, killer, "CONNECTION_ID()", server_id)
with victim.cursor() as cur:
    print("victim after the kills:", outcome(lambda: cur.execute("SELECT 1")))
with killer.cursor() as cur:
    print("KILL CONNECTION thread_id():", outcome(lambda: cur.execute("KILL CONNECTION %d" % victim.thread_id())))
with victim.cursor() as cur:
    print("victim after KILL CONNECTION:", outcome(lambda: cur.execute("SELECT 1")))
with killer.cursor() as cur:
    print("KILL QUERY of an unknown id:", outcome(lambda: cur.execute("KILL QUERY 987654")))
selfish = connect()
with selfish.cursor() as cur:
    print("own KILL QUERY:", outcome(lambda: cur.execute("KILL QUERY %d" % selfish.thread_id())))
    print("after own KILL QUERY:", outcome(lambda: cur.execute("SELECT 1")))
    print("own KILL:", outcome(lambda: cur.execute("KILL %d" % selfish.thread_id())))
    print("after own KILL:", outcome(lambda: cur.execute("SELECT 1")))
