#!/usr/bin/env bash
# perf/login_storm.sh - #41's login storm: STORM clients logging in over SCRAM-SHA-256 at once
# and again as soon as they are in (perf/login_storm.py, niced, in its own autogroup as
# perf/abuse.sh's attackers are), beside a well-behaved pgbench -S whose p99 latency is the
# figure; the router (one core, transaction pool) and PgBouncer (scram-sha-256, the same pool
# size) in turn, rounds interleaved. Target: the bystander's p99 during the storm within 2x its
# p99 without it. The storm's client keeps each salt's salted password; the router's salt is
# the same on every login of a user, so its logins cost the client a few HMACs, while a server
# that salts each login anew makes the client derive every time (fewer logins reach it).
#
#   perf/login_storm.sh [SECONDS] [STORM] [ROUNDS]      (defaults 8, 2000, 3)
# Environment: QP_BIN=path runs that router binary instead of building a release one;
# CLIENTS (4) bystander pgbench clients.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/perf/lib.sh"
SECS=${1:-8} STORM=${2:-2000} ROUNDS=${3:-3} CLIENTS=${CLIENTS:-4}
# PgBouncer 1.18 keeps no prepared statements in transaction pooling: both run the simple protocol.
P99_MODE=simple
ulimit -n 65536 2>/dev/null || log "cannot raise the open-file limit"

if [ -n "${QP_BIN:-}" ]; then BIN=$QP_BIN; else build_router; fi
start_pg_pgbench qp-storm bench 10
PORT=$(free_port)
PGB_PORT=$(free_port)
bench_config "$PORT" 0 scram-sha-256 8 >"$BASE/querypilot.toml"
PGB_EXTRA="auth_type = scram-sha-256
max_client_conn = $((STORM + 100))" start_pgbouncer "$BASE/pgbouncer" bench "$PGB_PORT" 8
trap 'kill "$PGB_PID" 2>/dev/null || true; perf_cleanup' EXIT
# PgBouncer pinned to the router's core, so both serve from one CPU.
taskset -pc 0 "$PGB_PID" >/dev/null

# storm PORT: the storm through PORT for the pgbench run, printing its own figures.
storm() {
    setsid -w sh -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec "$@"' storm \
        nice -n 19 /usr/bin/python3 "$ROOT/perf/login_storm.py" 127.0.0.1 "$1" "$PG_USER" "$PG_PASSWORD" bench \
        "$STORM" "$((SECS + 3))" >"$BASE/storm.out" 2>&1 &
    local pid=$!
    sleep 2 # every thread started and logging in
    local lat
    lat=$(p99 "$1")
    wait "$pid" || true
    echo "$lat $(tail -1 "$BASE/storm.out")"
}

start_router "$BASE/querypilot.toml" "$PORT"
: >"$BASE/figures"
printf '%-10s %-6s %8s  %s\n' target storm p99_ms 'storm figures'
for r in $(seq "$ROUNDS"); do
    for target in router pgbouncer; do
        port=$PORT
        [ "$target" = pgbouncer ] && port=$PGB_PORT
        quiet=$(p99 "$port")
        printf '%-10s %-6s %8s\n' "$target" none "$quiet"
        echo "$target none $quiet" >>"$BASE/figures"
        read -r lat rest <<<"$(storm "$port")"
        printf '%-10s %-6s %8s  %s\n' "$target" "$STORM" "$lat" "$rest"
        echo "$target storm $lat" >>"$BASE/figures"
    done
done
echo
echo "p99 (ms) over $ROUNDS rounds: median [min-max], and the median's ratio to the same target without a storm"
ratio_table "$BASE/figures" 10
