#!/usr/bin/env bash
# mysql-side-by-side.sh - the MySQL path of router binaries side by side with direct MariaDB:
# `sysbench oltp_point_select` (16 threads, prepared statements as sysbench's default `auto`
# picks them) against direct MariaDB and every router on one core, all running at once and
# measured in interleaved rounds, so machine noise hits every candidate alike.
#
#   perf/mysql-side-by-side.sh NAME=BINARY [NAME=BINARY...]
#
# e.g. perf/mysql-side-by-side.sh before=/tmp/before/release/querypilot after=target/release/querypilot
#
# Reported per target: median QPS with min–max, ratio to direct, and proxy CPU µs per query
# (utime+stime of the proxy process, /proc/PID/stat).
# Environment (defaults): ROUNDS=3 SECONDS_PER_RUN=10 THREADS=16 POOL=8 TABLE_SIZE=10000.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
THREADS=${THREADS:-16}
POOL=${POOL:-8}
TABLE_SIZE=${TABLE_SIZE:-10000}
[ $# -ge 1 ] || { sed -n '2,13p' "$0" >&2; exit 2; }

# shellcheck source=perf/lib.sh
. "$ROOT/perf/lib.sh"

start_mariadb_sysbench qp-mysql-sbs oltp_point_select

declare -A PORT PID
TARGETS=(direct)
PORT[direct]=$MY_PRIMARY_PORT

for arg in "$@"; do
    name=${arg%%=*}
    bin=${arg#*=}
    port=$(free_port)
    my_bench_config "$port" "$POOL" 'log_level = "warn"' >"$BASE/$name.toml"
    "$bin" -c "$BASE/$name.toml" >"$BASE/$name.log" 2>&1 &
    PID[$name]=$!
    PIDS+=("$!")
    PORT[$name]=$port
    for _ in $(seq 600); do
        mariadb --no-defaults -h 127.0.0.1 -P "$port" -u "$MY_USER" -p"$MY_PASSWORD" "$MY_DATABASE" -e 'SELECT 1' \
            >/dev/null 2>&1 && break
        sleep 0.1
    done
    TARGETS+=("$name")
done

RAW="$BASE/raw.tsv"
: >"$RAW"
run() { # target seconds round
    local t0=0 t1=0 out qps
    [ -n "${PID[$1]:-}" ] && t0=$(cpu_ticks "${PID[$1]}")
    out=$(sysbench oltp_point_select "${SB_ARGS[@]}" --mysql-port="${PORT[$1]}" --threads="$THREADS" \
        --time="$2" run 2>&1) || log "sysbench against $1 failed: $(tail -n 3 <<<"$out")"
    [ -n "${PID[$1]:-}" ] && t1=$(cpu_ticks "${PID[$1]}")
    qps=$(sed -n 's/^ *queries: *[0-9]* *(\([0-9.]*\) per sec.)/\1/p' <<<"$out")
    local n; n=$(sed -n 's/^ *queries: *\([0-9]*\) .*/\1/p' <<<"$out")
    printf '%s\t%s\t%s\t%s\t%s\n' "$3" "$1" "${qps:-0}" "${n:-0}" "$((t1 - t0))" >>"$RAW"
}

log "warm-up"
for t in "${TARGETS[@]}"; do run "$t" 2 0; done
: >"$RAW"
n=${#TARGETS[@]}
for r in $(seq "$ROUNDS"); do
    for i in $(seq 0 $((n - 1))); do
        t=${TARGETS[$(((i + r) % n))]}
        log "round $r $t"
        run "$t" "$SECONDS_PER_RUN" "$r"
    done
done

python3 - "$RAW" "$(getconf CLK_TCK)" "$ROUNDS" "$THREADS" <<'PY'
import sys, statistics
from collections import defaultdict
raw, hz, rounds, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows, order = defaultdict(list), []
for line in open(raw):
    r, target, qps, n, ticks = line.rstrip("\n").split("\t")
    if target not in rows:
        order.append(target)
    cpu = int(ticks) / hz / int(n) * 1e6 if target != "direct" and int(n) else None
    rows[target].append((float(qps), cpu))
def fmt(vals, spec):
    vals = [v for v in vals if v is not None]
    return f"{statistics.median(vals):{spec}} ({min(vals):{spec}}–{max(vals):{spec}})" if vals else "—"
direct = statistics.median(v[0] for v in rows["direct"])
print(f"`sysbench oltp_point_select`, {threads} threads, medians over {rounds} interleaved rounds (min–max).\n")
print("| target | QPS | × direct | proxy CPU µs/query |")
print("|---|---|---:|---|")
for t in order:
    v = rows[t]
    ratio = statistics.median(x[0] for x in v) / direct if direct else 0
    print(f"| {t} | {fmt([x[0] for x in v], '.0f')} | {ratio:.2f} | {fmt([x[1] for x in v], '.1f')} |")
PY
