#!/usr/bin/env bash
# perf/many_clients.sh - #41's many clients: CLIENTS clients connected at once driving a
# transaction pool of 8, through the router and through PgBouncer, rounds interleaved. Reports
# each run's latency p50 and p99 from pgbench's per-transaction log and their ratio (target
# <= 3), the transactions that failed, pgbench's own CPU time per wall second (a load generator
# polling thousands of sockets is itself a source of tail latency on a small host) and the load
# average, and the backend logins during the run (a connection moved between the router's cores
# is a close on one and a login on the other, #41); then per target the median [min-max] over
# the rounds.
#
#   perf/many_clients.sh [SECONDS] [CLIENTS] [RATE] [ROUNDS]     (defaults 20, 10000, 2000, 2)
#
# Two modes (MODE):
#   rate (default)  `pgbench -S -R RATE`: each client's transactions are scheduled, so a client
#                   that waits longer than the others shows in the latency tail (schedule lag
#                   included: the wait for a connection is what is measured).
#   saturate        every client runs `SELECT pg_sleep(SLEEP)` back to back (no -R): the pool of
#                   8 is the bottleneck and every client queues for it, so p99/p50 is the
#                   fairness of the queue itself (FIFO: every client waits one turn of the whole
#                   queue). RATE is ignored.
# In both modes the first WARMUP seconds are left out: pgbench logs all its clients in first
# (10,000 md5 logins take seconds), and transactions scheduled meanwhile start late.
# Environment: QP_BIN=path runs that router binary instead of building a release one;
# CORES ("0, 1") the router's cores; ACTIVE (default CLIENTS) how many of the clients pgbench
# drives, the others held connected and idle by perf/idle_clients.py (separates what 10,000
# connections cost the proxy from what 10,000 sockets cost pgbench's two threads);
# SLEEP (0.002) for MODE=saturate; WARMUP (5); TARGETS ("router pgbouncer"; "direct" runs the
# ACTIVE clients straight to PostgreSQL, a server process each and no idle clients: the host's
# and pgbench's own tail, with no proxy and no pool, for ACTIVE below the server's 600); QP_BASE=path
# also runs that router binary as target "base" (e.g. a build before a change), same config.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/perf/lib.sh"
SECS=${1:-20} CLIENTS=${2:-10000} RATE=${3:-2000} ROUNDS=${4:-2}
MODE=${MODE:-rate} ACTIVE=${ACTIVE:-$CLIENTS} SLEEP=${SLEEP:-0.002} WARMUP=${WARMUP:-5}
TARGETS=${TARGETS:-router ${QP_BASE:+base }pgbouncer}
ulimit -n 65536 2>/dev/null || log "cannot raise the open-file limit: $((CLIENTS * 2)) descriptors are needed"

if [ -n "${QP_BIN:-}" ]; then BIN=$QP_BIN; else build_router; fi
start_pg_pgbench qp-many bench 10
PORT=$(free_port)
PGB_PORT=$(free_port)
bench_config "$PORT" "${CORES:-0, 1}" md5 8 >"$BASE/querypilot.toml"
PGB_EXTRA="max_client_conn = $((CLIENTS + 100))" start_pgbouncer "$BASE/pgbouncer" bench "$PGB_PORT" 8
IDLE_PIDS=()
BASE_PID=""
stop_all() {
    for p in "${IDLE_PIDS[@]}" $BASE_PID; do kill "$p" 2>/dev/null || true; done
    kill "$PGB_PID" 2>/dev/null || true
    perf_cleanup
}
trap stop_all EXIT
start_base_router "$PORT"
start_router "$BASE/querypilot.toml" "$PORT"
echo "SELECT pg_sleep($SLEEP);" >"$BASE/sleep.sql"

# hold_idle PORT: CLIENTS - ACTIVE idle clients on PORT, held until the script ends.
hold_idle() {
    local n=$((CLIENTS - ACTIVE))
    [ "$n" -gt 0 ] || return 0
    local fifo="$BASE/idle.$1"
    mkfifo "$fifo"
    # stdin held open by `sleep infinity`: the idlers hold their clients until killed.
    sleep infinity | python3 "$ROOT/perf/idle_clients.py" 127.0.0.1 "$1" "$PG_USER" "$PGPASSWORD" bench "$n" >"$fifo" 2>&1 &
    IDLE_PIDS+=($!)
    local ready
    read -r _ ready <"$fifo" || ready=0
    log "port $1: $ready idle clients held"
}

# sessions: backend logins into the bench database so far (pg_stat_database, flushed by each
# backend within a second or so; one more for this query's own).
sessions() {
    "$PG_BIN/psql" -X -Atq -h "$PG_HOST" -p "$PG_PRIMARY_PORT" -U "$PG_SUPERUSER" -d bench \
        -c "SELECT pg_stat_force_next_flush(); SELECT sessions FROM pg_stat_database WHERE datname = 'bench'" | tail -n 1
}

# run PORT: pgbench through PORT; prints "p50_ms p99_ms failed transactions cpu_per_sec logins".
run() {
    rm -f "$BASE"/pgb.*
    local before
    before=$(sessions)
    local work=(-S -R "$RATE") out
    [ "$MODE" = saturate ] && work=(-f "$BASE/sleep.sql")
    local start
    start=$(date +%s)
    out=$(/usr/bin/time -f 'cpu %U %S %e' pgbench -n "${work[@]}" -M simple -c "$ACTIVE" -j 2 -T "$SECS" -l \
        --log-prefix="$BASE/pgb" -h 127.0.0.1 -p "$1" -U "$PG_USER" bench 2>&1 || true)
    local failed cpu
    failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
    if grep -q "aborted" <<<"$out"; then
        failed="${failed:-0}+aborted($(grep -c 'aborted' <<<"$out"))"
        grep -m1 "aborted" <<<"$out" >&2
    fi
    grep -q "^number of transactions actually processed" <<<"$out" || tail -n 3 <<<"$out" >&2
    cpu=$(awk '/^cpu /{printf "%.2f", ($2 + $3) / ($4 > 0 ? $4 : 1)}' <<<"$out")
    sleep 2
    local logins=$(($(sessions) - before - 1))
    # Column 3 is the latency in microseconds (schedule lag included), column 5 the epoch
    # second the transaction ended.
    cat "$BASE"/pgb.* | awk -v from=$((start + WARMUP)) '$5 >= from {print $3}' | sort -n |
        awk -v f="${failed:-0}" -v c="$cpu" -v l="$logins" '{a[NR]=$1} END {printf "%.2f %.2f %s %d %s %d", a[int(NR*0.5)]/1000, a[int(NR*0.99)]/1000, f, NR, c, l}'
}

port_of() { case $1 in pgbouncer) echo "$PGB_PORT" ;; base) echo "$BASE_PORT" ;; direct) echo "$PG_PRIMARY_PORT" ;; *) echo "$PORT" ;; esac; }
# No idle clients on PostgreSQL itself: a server process each.
for target in $TARGETS; do [ "$target" = direct ] || hold_idle "$(port_of "$target")"; done
log "mode $MODE, $ACTIVE of $CLIENTS clients driven by pgbench"
: >"$BASE/figures"
printf '%-10s %9s %9s %7s %8s %12s %8s %7s %s\n' target p50_ms p99_ms p99/p50 failed transactions pgb_cpu logins load
for r in $(seq "$ROUNDS"); do
    for target in $TARGETS; do
        port=$(port_of "$target")
        read -r p50 p99 failed n cpu logins <<<"$(run "$port")"
        ratio=$(python3 -c "print(f'{$p99 / max($p50, 0.001):.2f}')")
        load=$(cut -d' ' -f1 /proc/loadavg)
        printf '%-10s %9s %9s %7s %8s %12s %8s %7s %s\n' "$target" "$p50" "$p99" "$ratio" "$failed" "$n" "$cpu" "$logins" "$load"
        echo "$target $p50 $p99 $ratio" >>"$BASE/figures"
    done
done
python3 - "$BASE/figures" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    t, *v = line.split()
    runs.setdefault(t, []).append([float(x) for x in v])
print("median [min-max] over the rounds")
for t, rows in runs.items():
    cols = list(zip(*rows))
    fmt = lambda c: f"{statistics.median(c):.2f} [{min(c):.2f}-{max(c):.2f}]"
    print(f"{t:10} p50 {fmt(cols[0])}  p99 {fmt(cols[1])}  p99/p50 {fmt(cols[2])}")
PY
