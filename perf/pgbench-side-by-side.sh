#!/usr/bin/env bash
# pgbench-side-by-side.sh - pgbench select-only (-S) directly against PostgreSQL and through
# the router, side by side, and the router's CPU time per transaction.
#
#   perf/pgbench-side-by-side.sh [--no-build]
#
# Starts its own PostgreSQL pair with tests/support/dbs.sh (torn down on exit), builds the
# router with `cargo build --release` (skip with --no-build when target/release/querypilot is
# current), writes a router config (transaction pooling, POOL connections, CORES cores),
# initializes a pgbench database, then runs the same pgbench command twice. The router's CPU
# time is utime+stime from /proc/PID/stat sampled right before and after the routed run,
# divided by the transactions pgbench reports.
#
# Environment (defaults): CLIENTS=32 JOBS=4 SECONDS_PER_RUN=10 SCALE=10 POOL=4 CORES=1
# MODE=simple (pgbench -M: simple|extended|prepared).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLIENTS=${CLIENTS:-32}
JOBS=${JOBS:-4}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
SCALE=${SCALE:-10}
POOL=${POOL:-4}
CORES=${CORES:-1}
MODE=${MODE:-simple}

# shellcheck source=perf/lib.sh
. "$ROOT/perf/lib.sh"

build_router "$([ "${1:-}" = "--no-build" ] && echo 0 || echo 1)"
DB=pgbench_perf
start_pg_pgbench qp-perf "$DB" "$SCALE"

PORT=$(free_port)
CORE_LIST=$(seq -s, 0 $((CORES - 1)))
CONF="$BASE/querypilot.toml"
cat >"$CONF" <<EOF
[general]
cores = [$CORE_LIST]

[[listeners]]
protocol = "postgres"
bind = "127.0.0.1:$PORT"

[pools.$DB]
mode = "transaction"
username = "$PG_USER"
password = "$PG_PASSWORD"
database = "$DB"
max_connections = $POOL
backends = [{ host = "$PG_HOST", port = $PG_PRIMARY_PORT }]

[routing]
default_pool = "$DB"
EOF
start_router "$CONF" "$PORT"

# run PORT: pgbench select-only; prints "tps transactions failed".
run() {
    local out
    out=$(pgbench -n -S -M "$MODE" -c "$CLIENTS" -j "$JOBS" -T "$SECONDS_PER_RUN" -h 127.0.0.1 -p "$1" -U "$PG_USER" "$DB" 2>&1)
    printf '%s\n' "$out" >>"$BASE/pgbench.log"
    local tps tx failed
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
    tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
    echo "${tps:-0} ${tx:-0} ${failed:-0}"
}

log "direct run: pgbench -S -M $MODE -c $CLIENTS -j $JOBS -T $SECONDS_PER_RUN"
read -r D_TPS D_TX D_FAIL < <(run "$PG_PRIMARY_PORT")
log "routed run (pool of $POOL, $CORES core(s))"
T0=$(cpu_ticks "$ROUTER_PID")
read -r R_TPS R_TX R_FAIL < <(run "$PORT")
T1=$(cpu_ticks "$ROUTER_PID")
HZ=$(getconf CLK_TCK)

printf '\n%-10s %12s %14s %8s\n' "path" "tps" "transactions" "failed"
printf '%-10s %12s %14s %8s\n' "direct" "$D_TPS" "$D_TX" "$D_FAIL"
printf '%-10s %12s %14s %8s\n' "router" "$R_TPS" "$R_TX" "$R_FAIL"
python3 - "$T0" "$T1" "$HZ" "$R_TX" "$D_TPS" "$R_TPS" <<'EOF'
import sys
t0, t1, hz, tx = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
d_tps, r_tps = float(sys.argv[5]), float(sys.argv[6])
cpu = (t1 - t0) / hz
per = cpu / tx * 1e6 if tx else float("nan")
print(f"\nrouter CPU: {cpu:.2f} s for {tx} transactions = {per:.1f} us/transaction")
if d_tps:
    print(f"router throughput: {r_tps / d_tps * 100:.1f}% of direct")
EOF
