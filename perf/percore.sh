#!/usr/bin/env bash
# perf/percore.sh - #39's per-core independence, measured so that a loaded host does not blur it:
# user-space instructions per transaction of the router (callgrind) on one core and on two for
# the same pgbench load, with the backend logins PostgreSQL counted meanwhile (a connection one
# core gives up so another may open one is a login: work a second core can add per transaction).
# Then system calls per transaction (`strace -c -f`) on one core and two, 16 clients and 1.
#
#   perf/percore.sh [NAME=BINARY ...]      (default: built=<a release build of this tree>)
#
# Environment (defaults): CALLGRIND_TX=200 (per client, 16 clients) MODES="simple extended
# prepared" STRACE_TX=1250 (per client at 16 clients; ×16 for the one-client row) POOL=8
# STRACES=1 (0: callgrind only) IDLE_SECONDS=5 CG_KEEP=DIR (keep each callgrind file there, for
# `callgrind_annotate` and perf/cg_diff.py) ONE_CORE=0 (1: the one-core rows only, for comparing
# builds; the two-core columns print as "-") CLIENTS=16 (pgbench clients of the callgrind rows;
# 1 with CALLGRIND_TX=3200 for the one-client path, where no checkout ever waits).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=perf/lib.sh
. "$ROOT/perf/lib.sh"
CALLGRIND_TX=${CALLGRIND_TX:-200} MODES=${MODES:-simple extended prepared} STRACE_TX=${STRACE_TX:-1250}
POOL=${POOL:-8} STRACES=${STRACES:-1} IDLE_SECONDS=${IDLE_SECONDS:-5} ONE_CORE=${ONE_CORE:-0}
CLIENTS=${CLIENTS:-16}
# pgbench's built-in script option: -S (select-only, the default), -N (simple-update), or
# "-b tpcb-like" (its default transaction, three UPDATEs among five statements in BEGIN/END).
WORKLOAD=${WORKLOAD:--S}
CORE_SETS="0 0,1"
[ "$ONE_CORE" = 0 ] || CORE_SETS=0

if [ $# -eq 0 ]; then
    build_router
    set -- "built=$BIN"
fi
DB=pgbench_percore
start_pg_pgbench qp-percore "$DB" 10
mkdir -p "$BASE/cg"
[ -z "${CG_KEEP:-}" ] || mkdir -p "$CG_KEEP"
chmod 777 "$BASE/cg"

# count PORT MODE OUT: "instructions/tx<TAB>background/tx" for CALLGRIND_TX transactions per
# client of `pgbench $WORKLOAD -M MODE -c CLIENTS` through PORT (after 20 uncounted ones). Background: what
# the router executes per second with no load (upkeep ticks, the health prober; counted over
# IDLE_SECONDS), times the counted run's wall-clock length, per transaction. Under callgrind a
# transaction takes ~50x its normal time, so this share is far larger here than on a real run,
# and a second core's ticks weigh as if they were per-transaction work.
count() {
    local port=$1 mode=$2 out=$3 bench total idle t0 t1
    # shellcheck disable=SC2086 # WORKLOAD is words: "-b tpcb-like"
    bench=(pgbench -n $WORKLOAD -M "$mode" -c "$CLIENTS" -j "$(( CLIENTS > 1 ? 2 : 1 ))" -h 127.0.0.1 -p "$port" -U "$PG_USER" "$DB")
    "${bench[@]}" -t 20 >/dev/null 2>&1
    idle=$(callgrind_total "$ROUTER_PID" "$out" sleep "$IDLE_SECONDS")
    t0=$(date +%s.%N)
    total=$(callgrind_total "$ROUTER_PID" "$out" "${bench[@]}" -t "$CALLGRIND_TX")
    t1=$(date +%s.%N)
    python3 -c "tx = $CLIENTS * $CALLGRIND_TX; print(f'{$total / tx:.0f}\t{$idle / $IDLE_SECONDS * ($t1 - $t0) / tx:.0f}')"
}

# Sessions PostgreSQL has opened on the database so far (PostgreSQL 14+).
sessions() {
    "$PG_BIN/psql" -X -A -t -h "$PG_HOST" -p "$PG_PRIMARY_PORT" -U "$PG_SUPERUSER" -d postgres \
        -c "SELECT sessions FROM pg_stat_database WHERE datname = '$DB'"
}

# Core 0 loads the function catalogs in the background once the router is up, and every core's
# plan cache is cleared when they arrive. Under callgrind that can happen seconds after the port
# answers, inside a counted run: on two cores it put two full parses (~670k instructions) into the
# count. So counting starts only once the load has ended, one way or the other (its log line).
export QUERYPILOT_LOG="warn,querypilot::session::context::udf=info"

stop_router() {
    kill -TERM "$ROUTER_PID" 2>/dev/null || true
    wait "$ROUTER_PID" 2>/dev/null || true
    ROUTER_PID=""
}

echo "| build | mode | 1 core instructions/tx (background) | 2 cores instructions/tx (background) | 2c ÷ 1c | 2c ÷ 1c without background | backend logins 1c / 2c |"
echo "|---|---|---:|---:|---:|---:|---|"
for arg in "$@"; do
    name=${arg%%=*} BIN=${arg#*=}
    for mode in $MODES; do
        declare -A ir=() bg=() logins=()
        ir[0,1]=- bg[0,1]=- logins[0,1]=-
        for cores in $CORE_SETS; do
            port=$(free_port)
            md5_pool_config "$port" "$cores" "$DB" "$POOL" >"$BASE/router.toml"
            out="$BASE/cg/$name-$mode-${cores/,/}.out"
            # Fair scheduling: valgrind runs one thread at a time, and with its default lock a
            # core that keeps entering its ring starves the other (two cores crawled, then hung).
            start_router "$BASE/router.toml" "$port" valgrind --tool=callgrind --fair-sched=yes --instr-atstart=no \
                --callgrind-out-file="$out"
            wait_catalogs
            s0=$(sessions)
            IFS=$'\t' read -r "ir[$cores]" "bg[$cores]" < <(count "$port" "$mode" "$out")
            logins[$cores]=$(($(sessions) - s0))
            stop_router
            [ -z "${CG_KEEP:-}" ] || cp "$out"* "$CG_KEEP/"
        done
        ratios="- | -"
        [ "$ONE_CORE" = 1 ] || ratios=$(python3 -c "a, b, x, y = ${ir[0]}, ${ir[0,1]}, ${bg[0]}, ${bg[0,1]}; print(f'{b / max(a, 1):.3f} | {(b - y) / max(a - x, 1):.3f}')")
        echo "| $name | $mode | ${ir[0]} (${bg[0]}) | ${ir[0,1]} (${bg[0,1]}) | $ratios | ${logins[0]} / ${logins[0,1]} |"
    done
done
[ "$STRACES" = 1 ] || exit 0

echo
echo "System calls per transaction (\`strace -c -f\`, pgbench -S simple):"
echo
echo "| build | cores | clients | calls/tx | by name |"
echo "|---|---|---:|---:|---|"
for arg in "$@"; do
    name=${arg%%=*} BIN=${arg#*=}
    for cores in 0 0,1; do
        port=$(free_port)
        md5_pool_config "$port" "$cores" "$DB" "$POOL" >"$BASE/router.toml"
        start_router "$BASE/router.toml" "$port"
        pgbench -n -S -c 16 -j 2 -t 50 -h 127.0.0.1 -p "$port" -U "$PG_USER" "$DB" >/dev/null 2>&1 || true
        for clients in 16 1; do
            tx=$STRACE_TX
            [ "$clients" = 1 ] && tx=$((STRACE_TX * 16))
            IFS=$'\t' read -r total detail < <(strace_count "$ROUTER_PID" "$port" "$DB" "$tx" "$BASE/strace.txt" "$clients")
            echo "| $name | $cores | $clients | $total | $detail |"
        done
        stop_router
    done
done
