#!/usr/bin/env bash
# perf/causal-primary-reads.sh - what asking an autocommit read on the primary whether it wrote
# costs (#34), at its worst: every statement is a `route=primary` read under
# read_your_writes = "causal", so every one is probed (a simple Query goes between BEGIN and
# the probe + COMMIT; an extended batch gets the probe ahead of its Sync). Two router builds,
# OLD_BIN (before the probe) and NEW_BIN, in interleaved rounds on the same databases, for
# pgbench's simple, extended and prepared protocols: TPS and average latency; then each build's
# instructions per transaction under callgrind (16 clients x CALLGRIND_TX, default 200).
#
#   OLD_BIN=... NEW_BIN=... perf/causal-primary-reads.sh [ROUNDS] [SECONDS] [CLIENTS]   (3, 8, 8)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/perf/lib.sh"
ROUNDS=${1:-3} SECONDS_PER=${2:-8} CLIENTS=${3:-8}
: "${OLD_BIN:?set OLD_BIN to a release build from before the probe}" "${NEW_BIN:?set NEW_BIN}"

start_pg_pgbench qp-causal-reads bench 10
PORT=$(free_port)
pg_split_config "$PORT" bench 8 causal >"$BASE/causal.toml"
printf '\\set aid random(1, 1000000)\n/* querypilot: route=primary */ SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n' \
    >"$BASE/read.sql"

echo "| round | build | protocol | tps | latency avg ms |"
echo "|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
    for build in old new; do
        if [ $build = old ]; then BIN=$OLD_BIN; else BIN=$NEW_BIN; fi
        start_router "$BASE/causal.toml" "$PORT"
        for protocol in simple extended prepared; do
            out=$(pgbench -n -M $protocol -f "$BASE/read.sql" -c "$CLIENTS" -j 2 -T "$SECONDS_PER" \
                -h 127.0.0.1 -p "$PORT" -U "$PG_USER" bench 2>&1)
            tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
            lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")
            echo "| $round | $build | $protocol | $tps | $lat |"
        done
        kill -TERM "$ROUTER_PID"; wait "$ROUTER_PID" 2>/dev/null || true; ROUTER_PID=""
    done
done

echo
echo "router instructions per transaction (callgrind, 16 clients x ${CALLGRIND_TX:-200}):"
for build in old new; do
    if [ $build = old ]; then BIN=$OLD_BIN; else BIN=$NEW_BIN; fi
    for protocol in simple prepared; do
        start_router "$BASE/causal.toml" "$PORT" valgrind --tool=callgrind --instr-atstart=no \
            --callgrind-out-file="$BASE/cg-$build-$protocol.out"
        ir=$(callgrind_count "$ROUTER_PID" "$PORT" bench $protocol "${CALLGRIND_TX:-200}" \
            "$BASE/cg-$build-$protocol.out" -f "$BASE/read.sql")
        echo "- $build, $protocol: $ir"
        kill -TERM "$ROUTER_PID"; wait "$ROUTER_PID" 2>/dev/null || true; ROUTER_PID=""
    done
done
