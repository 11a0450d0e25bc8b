#!/usr/bin/env bash
# perf/mysql_cg.sh - #39's MySQL line measured so that a loaded host does not blur it: user-space
# instructions of the router (callgrind) per `sysbench oltp_point_select` query, one sysbench
# thread, the router on one core in front of the test MariaDB primary; with prepared statements
# (`--db-ps-mode=auto`: COM_STMT_EXECUTE) and with the text protocol (`disable`: COM_QUERY).
#
#   perf/mysql_cg.sh [NAME=BINARY ...]      (default: built=<a release build of this tree>)
#
# Environment (defaults): EVENTS=5000 (queries counted per row; sysbench's login and its
# prepares are counted with them, so keep it large) PS_MODES="auto disable" IDLE_SECONDS=5
# TABLE_SIZE=10000 CG_KEEP=DIR (keep each callgrind file there, for `callgrind_annotate` and
# perf/cg_diff.py). Background: what the router executes per second with no load (upkeep ticks,
# the health prober), times the counted run's wall-clock length, per query, as perf/percore.sh
# reports it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=perf/lib.sh
. "$ROOT/perf/lib.sh"
EVENTS=${EVENTS:-5000} PS_MODES=${PS_MODES:-auto disable} IDLE_SECONDS=${IDLE_SECONDS:-5}
TABLE_SIZE=${TABLE_SIZE:-10000}

if [ $# -eq 0 ]; then
    build_router
    set -- "built=$BIN"
fi
start_mariadb_sysbench qp-mysql-cg oltp_point_select
mkdir -p "$BASE/cg"
[ -z "${CG_KEEP:-}" ] || mkdir -p "$CG_KEEP"
# As perf/percore.sh: counting starts once core 0 has loaded the function catalogs, whose
# arrival clears the plan cache.
export QUERYPILOT_LOG="warn,querypilot::session::context::udf=info"

# count PORT PS_MODE OUT: "instructions/query<TAB>background/query" for EVENTS queries of one
# sysbench thread through PORT (after 50 uncounted ones, which warm the plan cache and the pool).
count() {
    local port=$1 mode=$2 out=$3 total idle t0 t1 bench
    # --time=0: the run ends after its events, not after sysbench's default 10 s, which a
    # loaded host under callgrind reaches first (the count would divide too few queries).
    bench=(sysbench oltp_point_select "${SB_ARGS[@]}" --mysql-port="$port" --threads=1 --db-ps-mode="$mode"
        --rand-seed=1 --time=0 run)
    "${bench[@]}" --events=50 >/dev/null 2>&1 || log "warm-up sysbench through port $port failed"
    idle=$(callgrind_total "$ROUTER_PID" "$out" sleep "$IDLE_SECONDS")
    t0=$(date +%s.%N)
    total=$(callgrind_total "$ROUTER_PID" "$out" "${bench[@]}" --events="$EVENTS")
    t1=$(date +%s.%N)
    python3 -c "n = $EVENTS; print(f'{$total / n:.0f}\t{$idle / $IDLE_SECONDS * ($t1 - $t0) / n:.0f}')"
}

wait_my_port() {
    for _ in $(seq 1200); do
        mariadb --no-defaults -h 127.0.0.1 -P "$1" -u "$MY_USER" -p"$MY_PASSWORD" "$MY_DATABASE" -e 'SELECT 1' \
            >/dev/null 2>&1 && return
        sleep 0.1
    done
    log "nothing answers on port $1: see $BASE/router.log"
    exit 1
}


echo "| build | sysbench --db-ps-mode | instructions/query (background) |"
echo "|---|---|---:|"
for arg in "$@"; do
    name=${arg%%=*} BIN=${arg#*=}
    for mode in $PS_MODES; do
        port=$(free_port)
        my_bench_config "$port" 4 >"$BASE/router.toml"
        out="$BASE/cg/$name-$mode.out"
        valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
            "$BIN" -c "$BASE/router.toml" >"$BASE/router.log" 2>&1 &
        ROUTER_PID=$!
        PIDS=("$ROUTER_PID")
        wait_my_port "$port"
        wait_catalogs
        IFS=$'\t' read -r ir bg < <(count "$port" "$mode" "$out")
        kill -TERM "$ROUTER_PID" 2>/dev/null || true
        wait "$ROUTER_PID" 2>/dev/null || true
        PIDS=()
        [ -z "${CG_KEEP:-}" ] || cp "$out"* "$CG_KEEP/"
        echo "| $name | $mode | $ir ($bg) |"
    done
done
