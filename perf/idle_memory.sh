#!/usr/bin/env bash
# perf/idle_memory.sh - #39's idle-client line on its own: the router's RSS per idle PostgreSQL
# client (md5 login, transaction pooling, one core) with N held open by perf/idle_clients.py,
# and a 16-client `pgbench -S` beside them against the same router without them.
#
#   perf/idle_memory.sh [N] [NAME=BINARY ...]   (defaults: 10000, built=<a release build>)
#
# Environment: SECONDS_PER_RUN=10 (each pgbench run); ROUNDS=3 (pgbench without/with, alternated);
# IDLE_QUERY (each idle client runs it once before it goes idle, e.g. "SELECT 1");
# MASSIF=DIR also runs the router under valgrind's massif with N/10 idle clients and writes its
# report (`ms_print`: the heap's allocation sites at its peak, with the clients held) to DIR.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=perf/lib.sh
. "$ROOT/perf/lib.sh"
N=${1:-10000}
shift || true
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10} ROUNDS=${ROUNDS:-3}
if [ $# -eq 0 ]; then
    build_router
    set -- "built=$BIN"
fi
ulimit -n 65536 2>/dev/null || log "cannot raise the open-file limit"
DB=pgbench_idle
start_pg_pgbench qp-idle "$DB" 10
rss_kib() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
tps() {
    pgbench -n -S -c 16 -j 2 -T "$SECONDS_PER_RUN" -h 127.0.0.1 -p "$1" -U "$PG_USER" "$DB" 2>/dev/null |
        sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}

echo "| build | idle clients | RSS before → with them (KiB) | bytes per idle client | pgbench -S 16 TPS without / with them |"
echo "|---|---:|---|---:|---|"
for arg in "$@"; do
    name=${arg%%=*} BIN=${arg#*=}
    port=$(free_port)
    md5_pool_config "$port" 0 "$DB" 8 >"$BASE/router.toml"
    start_router "$BASE/router.toml" "$port"
    pgbench -n -S -c 16 -j 2 -t 200 -h 127.0.0.1 -p "$port" -U "$PG_USER" "$DB" >/dev/null 2>&1
    without=()
    for _ in $(seq "$ROUNDS"); do without+=("$(tps "$port")"); done
    rss0=$(rss_kib "$ROUTER_PID")
    coproc IDLERS { python3 "$ROOT/perf/idle_clients.py" 127.0.0.1 "$port" "$PG_USER" "$PGPASSWORD" "$DB" "$N" "${IDLE_QUERY:-}" 2>&1; }
    read -r _ ready <&"${IDLERS[0]}" || ready=0
    sleep 2
    rss1=$(rss_kib "$ROUTER_PID")
    with=()
    for _ in $(seq "$ROUNDS"); do with+=("$(tps "$port")"); done
    exec {IDLERS[1]}>&-
    wait "$IDLERS_PID" 2>/dev/null || true
    kill -TERM "$ROUTER_PID"; wait "$ROUTER_PID" 2>/dev/null || true; ROUTER_PID=""
    per=$(((rss1 - rss0) * 1024 / (ready > 0 ? ready : 1)))
    echo "| $name | $ready of $N | $rss0 → $rss1 | $per | ${without[*]} / ${with[*]} |"
done
[ -n "${MASSIF:-}" ] || exit 0

# The heap of N/10 idle clients at its peak, by allocation site.
few=$((N / 10))
for arg in "$@"; do
    name=${arg%%=*} BIN=${arg#*=}
    port=$(free_port)
    md5_pool_config "$port" 0 "$DB" 8 >"$BASE/router.toml"
    start_router "$BASE/router.toml" "$port" valgrind --tool=massif --depth=40 --threshold=0.5 \
        --massif-out-file="$BASE/massif-$name.out"
    coproc IDLERS { python3 "$ROOT/perf/idle_clients.py" 127.0.0.1 "$port" "$PG_USER" "$PGPASSWORD" "$DB" "$few" 2>&1; }
    read -r _ ready <&"${IDLERS[0]}" || ready=0
    sleep 5
    exec {IDLERS[1]}>&-
    wait "$IDLERS_PID" 2>/dev/null || true
    kill -TERM "$ROUTER_PID"; wait "$ROUTER_PID" 2>/dev/null || true; ROUTER_PID=""
    ms_print "$BASE/massif-$name.out" >"$MASSIF/massif-$name.txt"
    echo "massif ($name, $ready idle clients): $MASSIF/massif-$name.txt"
done
