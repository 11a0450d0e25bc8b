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
cleanup_all() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    perf_cleanup
}
trap cleanup_all EXIT

declare -A PORT PID
TARGETS=(direct)
PORT[direct]=$PG_PRIMARY_PORT

wait_port() {
    for _ in $(seq 600); do
        "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$1" && return
        sleep 0.1
    done
    log "nothing answers on port $1"
    exit 1
}

router_conf() { # port cores
    cat <<EOF
[general]
cores = [$2]
log_level = "warn"

[[listeners]]
protocol = "postgres"
bind = "127.0.0.1:$1"
# The same client authentication as PgBouncer's below: a SCRAM login (4096 PBKDF2 rounds) costs
# more than a thousand transactions' relaying, which would bill the proxies unequally.
auth_method = "md5"

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
}

# start_router NAME BINARY CORES [LAUNCHER...]
launch_router() {
    local name=$1 bin=$2 cores=$3
    shift 3
    local port
    port=$(free_port)
    router_conf "$port" "$cores" >"$BASE/$name.toml"
    "$@" "$bin" -c "$BASE/$name.toml" >"$BASE/$name.log" 2>&1 &
    PID[$name]=$!
    PIDS+=("$!")
    PORT[$name]=$port
    wait_port "$port"
}

if command -v pgbouncer >/dev/null; then
    port=$(free_port)
    cat >"$BASE/pgbouncer.ini" <<EOF
[databases]
$DB = host=$PG_HOST port=$PG_PRIMARY_PORT dbname=$DB
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
auth_type = md5
auth_file = $BASE/userlist.txt
pool_mode = transaction
default_pool_size = $POOL
max_client_conn = 1000
unix_socket_dir =
logfile = $BASE/pgbouncer.log
EOF
    printf '"%s" "%s"\n' "$PG_USER" "$PG_PASSWORD" >"$BASE/userlist.txt"
    if [ "$(id -u)" = 0 ]; then
        # PgBouncer refuses to run as root: run it as the postgres user.
        chmod 755 "$BASE"
        touch "$BASE/pgbouncer.log"
        chown postgres: "$BASE/pgbouncer.ini" "$BASE/userlist.txt" "$BASE/pgbouncer.log"
        setpriv --reuid=postgres --regid=postgres --init-groups pgbouncer "$BASE/pgbouncer.ini" >/dev/null 2>&1 &
    else
        pgbouncer "$BASE/pgbouncer.ini" >/dev/null 2>&1 &
    fi
    PID[pgbouncer]=$!
    PIDS+=("$!")
    PORT[pgbouncer]=$port
    wait_port "$port"
    TARGETS+=(pgbouncer)
fi

ROUTERS=()
for arg in "$@"; do
    name=${arg%%=*}
    bin=${arg#*=}
    for c in 1 2; do
        cores=0; [ $c = 2 ] && cores=0,1
        launch_router "$name-${c}c" "$bin" "$cores"
        TARGETS+=("$name-${c}c")
        ROUTERS+=("$name-${c}c")
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

# strace: system calls per transaction, 16 clients, simple.
STRACE="$BASE/strace.tsv"
: >"$STRACE"
for t in "${TARGETS[@]}"; do
    [ -n "${PID[$t]:-}" ] || continue
    case $t in *-2c) continue ;; esac
    strace -f -c -o "$BASE/strace-$t.txt" -p "${PID[$t]}" 2>/dev/null &
    st=$!
    sleep 1
    # Simple mode: PgBouncer (1.18 here) cannot serve prepared statements in transaction mode.
    pgbench -n -S -M simple -c 16 -j 2 -t "$STRACE_TX" -h 127.0.0.1 -p "${PORT[$t]}" -U "$PG_USER" "$DB" >/dev/null 2>&1 ||
        log "pgbench under strace against $t failed"
    kill -INT "$st"
    wait "$st" 2>/dev/null || true
    python3 - "$BASE/strace-$t.txt" "$t" "$((STRACE_TX * 16))" >>"$STRACE" <<'PY'
import sys
calls = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        calls[f[-1]] = int(f[3])
tx = int(sys.argv[3])
total = sum(calls.values()) / tx
detail = ", ".join(f"{k} {v / tx:.2f}" for k, v in sorted(calls.items(), key=lambda kv: -kv[1]) if v / tx >= 0.01)
print(f"{sys.argv[2]}\t{total:.2f}\t{detail}")
PY
done

# callgrind: user-space instructions per transaction, one core, 16 clients. Routers in simple
# and prepared mode; PgBouncer (when PGB_CALLGRIND=1, and installed) in simple mode, the one its
# 1.18 serves in transaction pooling.
CG="$BASE/callgrind.tsv"
: >"$CG"
# callgrind_count NAME MODE: instructions per transaction of target NAME (running under
# callgrind with instrumentation off) over CALLGRIND_TX transactions per client in MODE.
callgrind_count() {
    local name=$1 mode=$2 pid=${PID[$1]} ir
    # callgrind_control reaches the process through vgdb's pipes, which carry the name of the
    # user it runs as: PgBouncer's is controlled as its own user.
    local ctl=(callgrind_control)
    [ "$(stat -c %U "/proc/$pid")" = "$(id -un)" ] || ctl=(setpriv --reuid="$(stat -c %U "/proc/$pid")" --regid="$(stat -c %G "/proc/$pid")" --init-groups callgrind_control)
    pgbench -n -S -M "$mode" -c 16 -j 2 -t 20 -h 127.0.0.1 -p "${PORT[$name]}" -U "$PG_USER" "$DB" >/dev/null 2>&1
    rm -f "$BASE"/cg/"$name".out*
    "${ctl[@]}" -i on "$pid" >/dev/null 2>&1 || log "callgrind_control cannot reach $name"
    pgbench -n -S -M "$mode" -c 16 -j 2 -t "$CALLGRIND_TX" -h 127.0.0.1 -p "${PORT[$name]}" -U "$PG_USER" "$DB" >/dev/null 2>&1 ||
        log "pgbench under callgrind against $name ($mode) failed"
    "${ctl[@]}" -i off "$pid" >/dev/null 2>&1 || true
    "${ctl[@]}" -d "$pid" >/dev/null 2>&1 || true
    sleep 1
    # A dump taken after instrumentation was switched off heads its file with `summary: 0`;
    # `totals:` at its end holds the instructions counted.
    ir=$(cat "$BASE"/cg/"$name".out* 2>/dev/null | sed -n 's/^totals: \([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
    printf '%s\t%s\t%s\n' "${name%-cg}" "$mode" "$((ir / (CALLGRIND_TX * 16)))" >>"$CG"
}
mkdir -p "$BASE/cg"
chmod 777 "$BASE/cg"
for arg in "$@"; do
    name=${arg%%=*}
    bin=${arg#*=}
    launch_router "$name-cg" "$bin" 0 valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$BASE/cg/$name-cg.out"
    for mode in simple prepared; do callgrind_count "$name-cg" "$mode"; done
    kill -TERM "${PID[$name-cg]}" 2>/dev/null || true
    wait "${PID[$name-cg]}" 2>/dev/null || true
done
if [ "${PGB_CALLGRIND:-0}" = 1 ] && [ -n "${PID[pgbouncer]:-}" ]; then
    port=$(free_port)
    sed "s/^listen_port = .*/listen_port = $port/; s|^logfile = .*|logfile = $BASE/cg/pgbouncer.log|" \
        "$BASE/pgbouncer.ini" >"$BASE/cg/pgbouncer.ini"
    vg=(valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$BASE/cg/pgbouncer-cg.out" pgbouncer "$BASE/cg/pgbouncer.ini")
    if [ "$(id -u)" = 0 ]; then
        touch "$BASE/cg/pgbouncer.log"
        chown postgres: "$BASE/cg/pgbouncer.ini" "$BASE/cg/pgbouncer.log"
        setpriv --reuid=postgres --regid=postgres --init-groups "${vg[@]}" >/dev/null 2>&1 &
    else
        "${vg[@]}" >/dev/null 2>&1 &
    fi
    PID[pgbouncer-cg]=$!
    PIDS+=("$!")
    PORT[pgbouncer-cg]=$port
    wait_port "$port"
    callgrind_count pgbouncer-cg simple
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
