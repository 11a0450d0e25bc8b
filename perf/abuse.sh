#!/usr/bin/env bash
# perf/abuse.sh - one client trying to exhaust the router (#33) beside a well-behaved pgbench -S:
# the router on one core (so the attacker shares the loop with pgbench), each attack running
# through it for the whole pgbench run. Prints pgbench's p99 latency without and with each
# attack, the router's peak RSS and what the attacker was told. The target: p99 within 2x,
# RSS bounded by limits.client_buffer_budget plus the router's own.
#
#   perf/abuse.sh [SECONDS] [CLIENTS] [ROUNDS]     (defaults 10, 4, 1)
# Environment: QP_BIN=path runs that router binary instead of building a release one;
# ATTACKS="parse burner" runs only those attacks;
# ATTACK_ROUTER=separate sends each attack to a second router process pinned to the same core
# (the control: the attacker's work costs the host the same, but the bystander's loop never runs
# it, so what is left of the excess is the host's cores being shared, not the shared loop);
# ATTACK_ROUTER=direct sends them to PostgreSQL itself (what the same client costs the
# bystander without a router);
# QP_BINS="name=path name=path" compares several side by side: each round runs every binary
# in turn (the same database, a fresh router each), and a last table gives each figure's median
# and range over the rounds.
#
# Attacks (raw-socket PostgreSQL clients, logged in through libpq):
#   parse   named Parse messages of 1 KiB, no Sync, as fast as it can: the session limit, then
#           the budget (54000 / 53200)
#   close   Close messages without Sync (answered by the router itself): backpressure
#   token   SET querypilot.causal_token with a 1 MB token, over and over (22023)
#   burner  no connection at all, a niced process spinning on the CPU as the attackers do: the
#           share of an attack's excess that is only the host's cores being shared (2-core
#           dev host, loaded by others: x1.4 on its own), not the router
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/perf/lib.sh"
SECS=${1:-10} CLIENTS=${2:-4} ROUNDS=${3:-1}

if [ -n "${QP_BINS:-}" ]; then
    read -r -a BINS <<<"$QP_BINS"
elif [ -n "${QP_BIN:-}" ]; then
    BINS=("router=$QP_BIN")
else
    build_router
    BINS=("router=$BIN")
fi
start_pg_pgbench qp-abuse bench 10
PORT=$(free_port)
abuse_config "$PORT" >"$BASE/querypilot.toml"
DSN="host=127.0.0.1 port=$PORT dbname=bench user=$PG_USER password=$PG_PASSWORD"
ATTACK_PORT=$PORT
case "${ATTACK_ROUTER:-}" in
separate)
    ATTACK_PORT=$(free_port)
    abuse_config "$ATTACK_PORT" >"$BASE/attacked.toml"
    ;;
direct) ATTACK_PORT=$PG_PRIMARY_PORT ;;
esac
ATTACK_DSN="host=127.0.0.1 port=$ATTACK_PORT dbname=bench user=$PG_USER password=$PG_PASSWORD"

cat >"$BASE/attack.py" <<'PY'
import os, re, socket, struct, sys, time
from psycopg import pq
kind, dsn, until = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
told = set()
def connect():
    pg = pq.PGconn.connect(dsn.encode())
    assert pg.status == pq.ConnStatus.OK, pg.error_message
    s = socket.socket(fileno=os.dup(pg.socket)); s.setblocking(False)
    return pg, s
def msg(tag, body):
    return tag + struct.pack("!i", len(body) + 4) + body
def drain(s):
    try:
        data = s.recv(1 << 20)
    except BlockingIOError:
        return
    told.update(m.decode() for m in re.findall(rb"\0C([0-9A-Z]{5})\0", data))  # ErrorResponse SQLSTATEs
conns = []
n = 0
while kind == "burner" and time.time() < until:
    pass
while kind != "burner" and time.time() < until:
    if not conns or (kind == "parse" and n % (300 * 64) == 0):
        conns.append(connect())  # a new session past the last one's limit: the budget is next
    pg, s = conns[-1]
    if kind == "parse":
        out = b"".join(msg(b"P", f"p{n + i}".encode() + b"\0" + b"SELECT 1 /*" + b"x" * 1000 + b"*/\0\0\0") for i in range(64))
    elif kind == "close":
        out = msg(b"C", b"Sx\0") * 8192
    else:
        token = ",".join(f"{d}-1-5" for d in range(100000))
        out = msg(b"Q", f"SET querypilot.causal_token = 'gtid:{token}'".encode() + b"\0")
    n += 64
    try:
        s.setblocking(True); s.settimeout(1); s.sendall(out); s.setblocking(False)
    except (TimeoutError, BlockingIOError):
        pass  # the router pushes back
    drain(s)
print(f"{kind}: told {sorted(told) or 'nothing'}")
PY

peak_rss() {
    local peak=0 now
    while kill -0 "$1" 2>/dev/null; do
        now=$(awk '/VmRSS/{print $2}' "/proc/$ROUTER_PID/status")
        [ "$now" -gt "$peak" ] && peak=$now
        sleep 0.2
    done
    echo $((peak / 1024))
}

# The router's CPU use (% of one core) since ticks $1.
cpu_since() {
    echo $((($(cpu_ticks "$ROUTER_PID") - $1) * 100 / ($(getconf CLK_TCK) * SECS)))
}

# One round of one router: the p99 without an attack, then with each, as "name attack p99 rss"
# (and the router's CPU use while pgbench ran).
round() {
    local name=$1 kind lat attacker watcher ticks attacked=""
    BIN=$2
    if [ "${ATTACK_ROUTER:-}" = separate ]; then
        start_router "$BASE/attacked.toml" "$ATTACK_PORT"
        attacked=$ROUTER_PID
    fi
    start_router "$BASE/querypilot.toml" "$PORT"
    ticks=$(cpu_ticks "$ROUTER_PID")
    lat=$(p99 "$PORT")
    printf '%-8s %-8s %10s %10s cpu %s%%\n' "$name" none "$lat" \
        "$(($(awk '/VmRSS/{print $2}' "/proc/$ROUTER_PID/status") / 1024))" "$(cpu_since "$ticks")"
    echo "$name none $lat" >>"$BASE/figures"
    for kind in ${ATTACKS:-parse close token burner}; do
        # Niced: a real attacker runs on its own host; here its CPU must not be what pgbench waits for.
        # With sched_autogroup_enabled a nice value counts only inside its session's group, so
        # the attacker gets a session (an autogroup) of its own, niced too, where the kernel lets it.
        setsid -w sh -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec "$@"' attacker \
            nice -n 19 /usr/bin/python3 "$BASE/attack.py" "$kind" "$ATTACK_DSN" "$((SECS + 2))" >"$BASE/attack.out" 2>&1 &
        attacker=$!
        peak_rss "$attacker" >"$BASE/rss.out" &
        watcher=$!
        sleep 1
        ticks=$(cpu_ticks "$ROUTER_PID")
        lat=$(p99 "$PORT")
        ticks=$(cpu_since "$ticks")
        wait "$attacker" || log "attacker $kind: $(tail -1 "$BASE/attack.out")"
        wait "$watcher"
        printf '%-8s %-8s %10s %10s cpu %s%% %s\n' "$name" "$kind" "$lat" "$(cat "$BASE/rss.out")" "$ticks" \
            "$(tail -1 "$BASE/attack.out")"
        echo "$name $kind $lat" >>"$BASE/figures"
    done
    kill -TERM "$ROUTER_PID" $attacked
    wait "$ROUTER_PID" $attacked 2>/dev/null || true
    ROUTER_PID=""
}

: >"$BASE/figures"
printf '%-8s %-8s %10s %10s %s\n' router attack p99_ms rss_mib 'cpu, told'
for r in $(seq "$ROUNDS"); do
    for entry in "${BINS[@]}"; do
        round "${entry%%=*}" "${entry#*=}"
    done
done
[ "$ROUNDS" -gt 1 ] || exit 0
echo
echo "p99 (ms) over $ROUNDS rounds: median [min-max], and the median's ratio to the same router without an attack"
ratio_table "$BASE/figures" 8
