#!/usr/bin/env bash
# rt-side-by-side.sh - event-loop candidates side by side (#21): direct PostgreSQL, PgBouncer
# and any number of router binaries, each router on 1 core and on 2 cores, all running at once
# and measured in interleaved rounds, so machine noise hits every candidate alike.
#
#   perf/rt-side-by-side.sh NAME=BINARY [NAME=BINARY...]
#
# e.g. perf/rt-side-by-side.sh glommio=/tmp/qp-before-target/release/querypilot \
#                              own=target/release/querypilot
#
# Per round and pgbench mode (simple, extended, prepared): `pgbench -n -S -c 16 -j 2 -t TX`
# against every target, the order rotated each round. Reported per target: median TPS and
# proxy CPU µs per transaction (utime+stime of the proxy process, /proc/PID/stat) with min–max.
# Then, deterministic counts for each proxy on one core (prepared mode, 16 clients):
# `strace -c -f` system calls per transaction (simple mode) and callgrind user-space instructions per
# transaction (routers in simple and prepared mode; PgBouncer in simple mode when PGB_CALLGRIND=1).
# Then one-client latency (pgbench -c 1, prepared): p50 added over direct.
#
# Environment (defaults): ROUNDS=3 TX=3750 (per client: 60,000 per run) SCALE=10 POOL=8
# STRACE_TX=1250 CALLGRIND_TX=200 ONE_TX=5000 MODES="simple extended prepared".
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${ROUNDS:-3}
TX=${TX:-3750}
SCALE=${SCALE:-10}
POOL=${POOL:-8}
STRACE_TX=${STRACE_TX:-1250}
CALLGRIND_TX=${CALLGRIND_TX:-200}
ONE_TX=${ONE_TX:-5000}
MODES=${MODES:-simple extended prepared}
[ $# -ge 1 ] || { sed -n '2,20p' "$0" >&2; exit 2; }

# shellcheck source=perf/lib.sh
. "$ROOT/perf/lib.sh"

DB=pgbench_rt
start_pg_pgbench qp-rt "$DB" "$SCALE"
PIDS=()
trap pids_then_perf_cleanup EXIT

declare -A PORT PID
TARGETS=(direct)
PORT[direct]=$PG_PRIMARY_PORT

# start_router NAME BINARY CORES [LAUNCHER...]
launch_router() {
    local name=$1 bin=$2 cores=$3
    shift 3
    local port
    port=$(free_port)
    md5_pool_config "$port" "$cores" "$DB" "$POOL" >"$BASE/$name.toml"
    "$@" "$bin" -c "$BASE/$name.toml" >"$BASE/$name.log" 2>&1 &
    PID[$name]=$!
    PIDS+=("$!")
    PORT[$name]=$port
    wait_pg_port "$port"
}

if command -v pgbouncer >/dev/null; then
    PORT[pgbouncer]=$(free_port)
    start_pgbouncer "$BASE/pgbouncer" "$DB" "${PORT[pgbouncer]}" "$POOL"
    PID[pgbouncer]=$PGB_PID
    PIDS+=("$PGB_PID")
    TARGETS+=(pgbouncer)
fi

for arg in "$@"; do
    name=${arg%%=*}
    bin=${arg#*=}
    for c in 1 2; do
        cores=0; [ $c = 2 ] && cores=0,1
        launch_router "$name-${c}c" "$bin" "$cores"
        TARGETS+=("$name-${c}c")
    done
done

RAW="$BASE/raw.tsv"
: >"$RAW"
run_pgbench() { # target mode clients tx -> "tps p50_ms"
    local out
    out=$(pgbench -n -S -M "$2" -c "$3" -j "$(($3 > 1 ? 2 : 1))" -t "$4" -h 127.0.0.1 -p "${PORT[$1]}" -U "$PG_USER" "$DB" 2>&1) ||
        log "pgbench against $1 ($2, $3 clients) failed: $(tail -n 3 <<<"$out")"
    echo "$out" >>"$BASE/pgbench.log"
    local tps lat
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
    lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")
    echo "${tps:-0} ${lat:-0}"
}

measure() { # target mode clients tx round label
    local t0=0 t1=0 tps lat
    [ -n "${PID[$1]:-}" ] && t0=$(cpu_ticks "${PID[$1]}")
    read -r tps lat < <(run_pgbench "$1" "$2" "$3" "$4")
    [ -n "${PID[$1]:-}" ] && t1=$(cpu_ticks "${PID[$1]}")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$5" "$6" "$3" "$1" "$tps" "$lat" "$((t1 - t0))" >>"$RAW"
}

log "warm-up"
for t in "${TARGETS[@]}"; do run_pgbench "$t" prepared 16 200 >/dev/null; done
n=${#TARGETS[@]}
for r in $(seq "$ROUNDS"); do
    for mode in $MODES; do
        for i in $(seq 0 $((n - 1))); do
            t=${TARGETS[$(((i + r) % n))]}
            log "round $r $mode $t"
            measure "$t" "$mode" 16 "$TX" "$r" "$mode"
        done
    done
    for i in $(seq 0 $((n - 1))); do
        t=${TARGETS[$(((i + r) % n))]}
        measure "$t" prepared 1 "$ONE_TX" "$r" prepared-1client
    done
done

# strace: system calls per transaction, 16 clients, simple (PgBouncer 1.18 cannot serve prepared
# statements in transaction mode), one core.
STRACE="$BASE/strace.tsv"
: >"$STRACE"
for t in "${TARGETS[@]}"; do
    [ -n "${PID[$t]:-}" ] || continue
    case $t in *-2c) continue ;; esac
    printf '%s\t%s\n' "$t" "$(strace_count "${PID[$t]}" "${PORT[$t]}" "$DB" "$STRACE_TX" "$BASE/strace-$t.txt")" >>"$STRACE"
done

# callgrind: user-space instructions per transaction, one core, 16 clients. Routers in simple
# and prepared mode; PgBouncer (when PGB_CALLGRIND=1, and installed) in simple mode, the one its
# 1.18 serves in transaction pooling.
CG="$BASE/callgrind.tsv"
: >"$CG"
mkdir -p "$BASE/cg"
chmod 777 "$BASE/cg"
for arg in "$@"; do
    name=${arg%%=*}
    bin=${arg#*=}
    launch_router "$name-cg" "$bin" 0 valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$BASE/cg/$name-cg.out"
    for mode in simple prepared; do
        printf '%s\t%s\t%s\n' "$name" "$mode" \
            "$(callgrind_count "${PID[$name-cg]}" "${PORT[$name-cg]}" "$DB" "$mode" "$CALLGRIND_TX" "$BASE/cg/$name-cg.out")" >>"$CG"
    done
    kill -TERM "${PID[$name-cg]}" 2>/dev/null || true
    wait "${PID[$name-cg]}" 2>/dev/null || true
done
if [ "${PGB_CALLGRIND:-0}" = 1 ] && [ -n "${PID[pgbouncer]:-}" ]; then
    PORT[pgbouncer-cg]=$(free_port)
    start_pgbouncer "$BASE/pgbouncer-cg" "$DB" "${PORT[pgbouncer-cg]}" "$POOL" \
        valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$BASE/cg/pgbouncer-cg.out"
    PID[pgbouncer-cg]=$PGB_PID
    PIDS+=("$PGB_PID")
    printf 'pgbouncer\tsimple\t%s\n' \
        "$(callgrind_count "${PID[pgbouncer-cg]}" "${PORT[pgbouncer-cg]}" "$DB" simple "$CALLGRIND_TX" "$BASE/cg/pgbouncer-cg.out")" >>"$CG"
fi

HZ=$(getconf CLK_TCK)
python3 - "$RAW" "$HZ" "$STRACE" "$CG" "$ROUNDS" "$((TX * 16))" "$((ONE_TX))" <<'PY'
import sys, statistics
from collections import defaultdict
raw, hz, strace, cg, rounds, tx16, tx1 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), int(sys.argv[7])
rows = defaultdict(list)
order = []
for line in open(raw):
    r, mode, clients, target, tps, lat, ticks = line.rstrip("\n").split("\t")
    key = (mode, target)
    if key not in rows:
        order.append(key)
    tx = tx16 if clients == "16" else tx1
    cpu = int(ticks) / hz / tx * 1e6 if target != "direct" else None
    rows[key].append((float(tps), float(lat), cpu))
def fmt(vals, spec):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "—"
    return f"{statistics.median(vals):{spec}} ({min(vals):{spec}}–{max(vals):{spec}})"
print(f"Medians over {rounds} interleaved rounds (min–max in parentheses).\n")
print("| mode | target | TPS | latency avg ms | proxy CPU µs/tx |")
print("|---|---|---|---|---|")
for mode, target in sorted(order, key=lambda k: (k[0], order.index(k))):
    v = rows[(mode, target)]
    print(f"| {mode} | {target} | {fmt([x[0] for x in v], '.0f')} | {fmt([x[1] for x in v], '.3f')} | {fmt([x[2] for x in v], '.1f')} |")
print("\nSystem calls per transaction (`strace -c -f`, 16 clients, simple, one core):\n")
print("| proxy | calls/tx | by name |")
print("|---|---:|---|")
for line in open(strace):
    t, total, detail = line.rstrip("\n").split("\t")
    print(f"| {t} | {total} | {detail} |")
print("\nUser-space instructions per transaction (callgrind, 16 clients, one core):\n")
print("| proxy | mode | instructions/tx |")
print("|---|---|---:|")
for line in open(cg):
    t, mode, ir = line.split()
    print(f"| {t} | {mode} | {int(ir):,} |")
PY
