#!/usr/bin/env bash
# perf/causal.sh - the cost of read_your_writes = "causal" against "session" (#22) on pgbench
# TPC-B through the router (read/write split over a primary and its standby, transaction
# pooling, 1 core): every TPC-B transaction writes, so under "causal" each one pays the extra
# round trip that reads its commit position before its connection goes back to the pool.
# Rounds alternate the two modes so a shared machine's drift hits both alike. Also times that
# query alone, directly on the primary.
#
#   perf/causal.sh [ROUNDS] [SECONDS] [CLIENTS]     (defaults 3, 8, 8)
# Then the router's own cost, which a busy machine does not blur: instructions per TPC-B
# transaction under callgrind (CALLGRIND_TX transactions per client, default 200, 16 clients).
# Environment: QP_BIN=path runs that router binary instead of building a release one.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/perf/lib.sh"
ROUNDS=${1:-3} SECONDS_PER=${2:-8} CLIENTS=${3:-8}

if [ -n "${QP_BIN:-}" ]; then BIN=$QP_BIN; else build_router; fi
start_pg_pgbench qp-causal bench 10
PORT=$(free_port)


echo 'SELECT pg_current_wal_insert_lsn();' >"$BASE/position.sql"
direct=$(pgbench -n -c 1 -T "$SECONDS_PER" -f "$BASE/position.sql" -h "$PG_HOST" -p "$PG_PRIMARY_PORT" -U "$PG_USER" bench 2>/dev/null |
    sed -n 's/^latency average = \([0-9.]*\) ms/\1/p')
echo "commit-position query alone, directly on the primary: latency average $direct ms"
echo "| round | mode | tps | latency avg ms |"
echo "|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
    for mode in session causal; do
        pg_split_config "$PORT" bench 8 "$mode" >"$BASE/$mode.toml"
        start_router "$BASE/$mode.toml" "$PORT"
        out=$(pgbench -n -c "$CLIENTS" -j 2 -T "$SECONDS_PER" -h 127.0.0.1 -p "$PORT" -U "$PG_USER" bench 2>&1)
        kill -TERM "$ROUTER_PID"; wait "$ROUTER_PID" 2>/dev/null || true; ROUTER_PID=""
        tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
        lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")
        echo "| $round | $mode | $tps | $lat |"
    done
done

echo
echo "router instructions per TPC-B transaction (callgrind, 16 clients x ${CALLGRIND_TX:-200}):"
for mode in session causal; do
    start_router "$BASE/$mode.toml" "$PORT" valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$BASE/cg-$mode.out"
    echo "- $mode: $(callgrind_count "$ROUTER_PID" "$PORT" bench simple "${CALLGRIND_TX:-200}" "$BASE/cg-$mode.out" -b tpcb-like)"
    kill -TERM "$ROUTER_PID"; wait "$ROUTER_PID" 2>/dev/null || true; ROUTER_PID=""
done
