#!/usr/bin/env bash
# perf/abuse-cost.sh - the router's instructions per attacker message of perf/abuse.sh's parse
# and Close floods (#33), counted by callgrind: deterministic, so old and new builds compare on
# a busy host where the wall-clock p99 of abuse.sh cannot be trusted.
#
#   perf/abuse-cost.sh [N]      (default 20000 messages per flood)
# Environment: QP_BINS="name=path name=path" counts each of several router binaries (default:
# a release build of this tree); CG_KEEP=dir keeps each run's callgrind file there.
#
# One attacker connection (logged in before counting starts) sends N messages exactly as
# abuse.sh's attacker writes them (64 a write, no Sync), then one Sync, and reads every answer;
# the instructions of the router between the first message and the ReadyForQuery, divided by N:
#   parse     named 1 KiB Parses: the first ~5,400 fill limits.session_prepared_bytes (16 MiB),
#             the rest are refused (54000) and skipped up to the Sync, as in the real flood
#   accepted  only as many named Parses as the limits accept (N / 4): the cost of a held one
#   skipped   named Parses after the batch failed (a duplicate name, 42P05), dropped up to the
#             Sync: what every session of the flood past limits.client_buffer_budget is told
#             at its first Parse (53200), most of the real flood's messages
#   close     Close of a statement the session never had, answered by the router itself
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/perf/lib.sh"
N=${1:-20000}

if [ -n "${QP_BINS:-}" ]; then
    read -r -a BINS <<<"$QP_BINS"
else
    build_router
    BINS=("router=$BIN")
fi
start_pg_pgbench qp-abuse-cost bench 1
PORT=$(free_port)
abuse_config "$PORT" >"$BASE/querypilot.toml"
DSN="host=127.0.0.1 port=$PORT dbname=bench user=$PG_USER password=$PG_PASSWORD"

# The attacker: logs in, has callgrind switched on, floods, syncs, reads the answer, has it
# switched off. Prints what it was told.
cat >"$BASE/flood.py" <<'PY'
import os, re, socket, struct, subprocess, sys, threading
from psycopg import pq
kind, dsn, n, pid = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
pg = pq.PGconn.connect(dsn.encode())
assert pg.status == pq.ConnStatus.OK, pg.error_message
s = socket.socket(fileno=os.dup(pg.socket)); s.setblocking(True)
def msg(tag, body):
    return tag + struct.pack("!i", len(body) + 4) + body
def batch(i):
    if kind == "close":
        return msg(b"C", b"Sx\0") * 64
    # skipped: the second Parse reuses the first's name (42P05), so all after it are skipped
    name = (lambda k: max(k - 1, 0)) if kind == "skipped" else (lambda k: k)
    return b"".join(msg(b"P", f"p{name(i + j)}".encode() + b"\0" + b"SELECT 1 /*" + b"x" * 1000 + b"*/\0\0\0") for j in range(64))
batches = [batch(i) for i in range(0, n, 64)]  # built before counting: the router's work only
got = bytearray()
def reader():
    # Answers are drained as they come, as the flood's attacker does: the router never waits on it.
    while not got.endswith(b"Z\0\0\0\x05I") and not got.endswith(b"Z\0\0\0\x05E"):
        data = s.recv(1 << 20)
        if not data:
            break
        got.extend(data)
ctl = lambda on: subprocess.run(["callgrind_control", "-i", on, pid], check=True, capture_output=True)
ctl("on")
t = threading.Thread(target=reader); t.start()
for b in batches:
    s.sendall(b)
s.sendall(msg(b"S", b""))
t.join()
ctl("off")
told = sorted(set(m.decode() for m in re.findall(rb"\0C([0-9A-Z]{5})\0", bytes(got))))
parsed, closed = got.count(b"1\0\0\0\x04"), got.count(b"3\0\0\0\x04")
print(f"{parsed} ParseComplete, {closed} CloseComplete, told {told or 'nothing'}")
PY

printf '%-10s %-9s %8s %14s  %s\n' router flood messages 'instr/message' 'answers'
for entry in "${BINS[@]}"; do
    name=${entry%%=*}
    BIN=${entry#*=}
    for kind in parse accepted skipped close; do
        count=$N
        [ "$kind" = accepted ] && count=$((N / 4))
        count=$(((count + 63) / 64 * 64)) # whole writes of 64
        out="$BASE/cg-$name-$kind.out"
        start_router "$BASE/querypilot.toml" "$PORT" valgrind --tool=callgrind --instr-atstart=no \
            --callgrind-out-file="$out"
        told=$(/usr/bin/python3 "$BASE/flood.py" "${kind/accepted/parse}" "$DSN" "$count" "$ROUTER_PID")
        callgrind_control -d "$ROUTER_PID" >/dev/null 2>&1 || true
        kill -TERM "$ROUTER_PID"
        wait "$ROUTER_PID" 2>/dev/null || true
        ROUTER_PID=""
        ir=$(cat "$out"* | sed -n 's/^totals: \([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
        printf '%-10s %-9s %8s %14s  %s\n' "$name" "$kind" "$count" "$((ir / count))" "$told"
        if [ -n "${CG_KEEP:-}" ]; then mkdir -p "$CG_KEEP" && cp "$out"* "$CG_KEEP/"; fi
    done
done
