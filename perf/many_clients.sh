#!/usr/bin/env bash
# perf/many_clients.sh - #41's many clients: CLIENTS pgbench clients (10,000 by default) connected
# at once, driving a transaction pool of 8 at a fixed total RATE (pgbench -R: each client's
# transactions are scheduled, so a client that waits longer than the others shows in the
# latency tail), through the router (two cores, so the queue spans cores) and through PgBouncer,
# rounds interleaved. Reports each run's latency p50 and p99 from pgbench's per-transaction log
# (schedule lag included: the wait for a connection is what is measured), their ratio (target
# <= 3), and the transactions that failed.
#
#   perf/many_clients.sh [SECONDS] [CLIENTS] [RATE] [ROUNDS]     (defaults 20, 10000, 2000, 2)
# Environment: QP_BIN=path runs that router binary instead of building a release one;
# CORES ("0, 1") the router's cores.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/perf/lib.sh"
SECS=${1:-20} CLIENTS=${2:-10000} RATE=${3:-2000} ROUNDS=${4:-2}
ulimit -n 65536 2>/dev/null || log "cannot raise the open-file limit: $((CLIENTS * 2)) descriptors are needed"

if [ -n "${QP_BIN:-}" ]; then BIN=$QP_BIN; else build_router; fi
start_pg_pgbench qp-many bench 10
PORT=$(free_port)
PGB_PORT=$(free_port)
bench_config "$PORT" "${CORES:-0, 1}" md5 8 >"$BASE/querypilot.toml"
PGB_EXTRA="max_client_conn = $((CLIENTS + 100))" start_pgbouncer "$BASE/pgbouncer" bench "$PGB_PORT" 8
trap 'kill "$PGB_PID" 2>/dev/null || true; perf_cleanup' EXIT
start_router "$BASE/querypilot.toml" "$PORT"

# run PORT: pgbench through PORT; prints "p50_ms p99_ms failed_or_aborted transactions".
run() {
    rm -f "$BASE"/pgb.*
    local out
    out=$(pgbench -n -S -M simple -c "$CLIENTS" -j 2 -R "$RATE" -T "$SECS" -l --log-prefix="$BASE/pgb" \
        -h 127.0.0.1 -p "$1" -U "$PG_USER" bench 2>&1 || true)
    local failed
    failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
    grep -q "aborted" <<<"$out" && failed="${failed:-0}+aborted($(grep -c 'aborted' <<<"$out"))"
    # Column 3 is the latency in microseconds, schedule lag included.
    cat "$BASE"/pgb.* | awk '{print $3}' | sort -n |
        awk -v f="${failed:-0}" '{a[NR]=$1} END {printf "%.2f %.2f %s %d", a[int(NR*0.5)]/1000, a[int(NR*0.99)]/1000, f, NR}'
}

: >"$BASE/figures"
printf '%-10s %8s %8s %7s %8s %s\n' target p50_ms p99_ms p99/p50 failed transactions
for r in $(seq "$ROUNDS"); do
    for target in router pgbouncer; do
        port=$PORT
        [ "$target" = pgbouncer ] && port=$PGB_PORT
        read -r p50 p99 failed n <<<"$(run "$port")"
        ratio=$(python3 -c "print(f'{$p99 / max($p50, 0.001):.2f}')")
        printf '%-10s %8s %8s %7s %8s %s\n' "$target" "$p50" "$p99" "$ratio" "$failed" "$n"
        echo "$target $p50 $p99 $ratio" >>"$BASE/figures"
    done
done
