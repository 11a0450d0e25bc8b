#!/usr/bin/env bash
# perf/causal-mysql.sh - the cost of read_your_writes = "causal" against "session" on MariaDB
# (#34): `sysbench oltp_write_only` (TPC-B-like: every transaction writes, so under "causal"
# each commit's GTID must be learned) through router binaries with a read/write split over a
# MariaDB primary and its replica, transaction pooling, 1 core. Every binary runs in both modes
# at once, measured in interleaved rounds so machine drift hits every candidate alike.
#
#   perf/causal-mysql.sh NAME=BINARY [NAME=BINARY...]
#
# e.g. perf/causal-mysql.sh before=/tmp/before/querypilot after=target/release/querypilot
# Environment (defaults): ROUNDS=5 SECONDS_PER_RUN=8 THREADS=8 POOL=8 TABLE_SIZE=10000
# CALLGRIND_EVENTS=1600 (transactions counted under callgrind after the timed rounds).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${ROUNDS:-5}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-8}
THREADS=${THREADS:-8}
POOL=${POOL:-8}
TABLE_SIZE=${TABLE_SIZE:-10000}
[ $# -ge 1 ] || { sed -n '2,12p' "$0" >&2; exit 2; }

# shellcheck source=perf/lib.sh
. "$ROOT/perf/lib.sh"

start_mariadb_sysbench qp-causal-my oltp_write_only

declare -A PORT PID
TARGETS=()
pool() { # name port
    printf '[pools.%s]\nmode = "transaction"\nusername = "%s"\npassword = "%s"\ndatabase = "%s"\n' \
        "$1" "$MY_USER" "$MY_PASSWORD" "$MY_DATABASE"
    printf 'max_connections = %s\nbackends = [{ host = "127.0.0.1", port = %s }]\n\n' "$POOL" "$2"
}
# start_target NAME BINARY MODE [LAUNCHER...]: a router in MODE on a free port (PORT[NAME],
# PID[NAME]), under LAUNCHER (e.g. valgrind) when given.
start_target() {
    local name=$1 bin=$2 mode=$3 port conf
    shift 3
    port=$(free_port)
    conf="$BASE/${name//\//-}.toml"
    {
        printf '[general]\ncores = [0]\nlog_level = "warn"\n\n[[listeners]]\nprotocol = "mysql"\nbind = "127.0.0.1:%s"\n\n' "$port"
        pool primary "$MY_PRIMARY_PORT"
        pool replica "$MY_REPLICA_PORT"
        printf '[routing]\nread_write_split = true\nwrite_pool = "primary"\nread_pool = "replica"\nread_your_writes = "%s"\n' "$mode"
    } >"$conf"
    "$@" "$bin" -c "$conf" >"${conf%.toml}.log" 2>&1 &
    PID[$name]=$!
    PIDS+=("$!")
    PORT[$name]=$port
    for _ in $(seq 600); do
        mariadb --no-defaults -h 127.0.0.1 -P "$port" -u "$MY_USER" -p"$MY_PASSWORD" "$MY_DATABASE" -e 'SELECT 1' \
            >/dev/null 2>&1 && break
        sleep 0.1
    done
}
for arg in "$@"; do
    for mode in session causal; do
        start_target "${arg%%=*}/$mode" "${arg#*=}" "$mode"
        TARGETS+=("${arg%%=*}/$mode")
    done
done

RAW="$BASE/raw.tsv"
run() { # target seconds round
    local out tps
    out=$(sysbench oltp_write_only "${SB_ARGS[@]}" --mysql-port="${PORT[$1]}" --threads="$THREADS" \
        --time="$2" run 2>&1) || log "sysbench against $1 failed: $(tail -n 3 <<<"$out")"
    tps=$(sed -n 's/^ *transactions: *[0-9]* *(\([0-9.]*\) per sec.)/\1/p' <<<"$out")
    printf '%s\t%s\t%s\n' "$3" "$1" "${tps:-0}" >>"$RAW"
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

python3 - "$RAW" "$ROUNDS" "$THREADS" <<'PY'
import sys, statistics
from collections import defaultdict
raw, rounds, threads = sys.argv[1], sys.argv[2], sys.argv[3]
rows, order = defaultdict(list), []
for line in open(raw):
    r, target, tps = line.rstrip("\n").split("\t")
    if target not in rows:
        order.append(target)
    rows[target].append((int(r), float(tps)))
def fmt(vals):
    return f"{statistics.median(vals):.0f} ({min(vals):.0f}–{max(vals):.0f})"
print(f"`sysbench oltp_write_only`, {threads} threads, medians over {rounds} interleaved rounds (min–max).\n")
print("| binary | mode | TPS | causal ÷ session, per round: median (min–max) |")
print("|---|---|---|---|")
for t in sorted(order):
    binary, mode = t.split("/")
    tps = [v for _, v in rows[t]]
    ratio = ""
    if mode == "causal":
        session = dict(rows[f"{binary}/session"])
        per = [v / session[r] for r, v in rows[t] if session.get(r)]
        ratio = f"{statistics.median(per):.3f} ({min(per):.3f}–{max(per):.3f})" if per else "—"
    print(f"| {binary} | {mode} | {fmt(tps)} | {ratio} |")
PY

# The router's own cost, which a busy machine does not blur: instructions per transaction.
EVENTS=${CALLGRIND_EVENTS:-1600}
echo
echo "router instructions per \`oltp_write_only\` transaction (callgrind, $THREADS threads, $EVENTS transactions):"
for arg in "$@"; do
    for mode in session causal; do
        name="${arg%%=*}/$mode-cg"
        start_target "$name" "${arg#*=}" "$mode" valgrind --tool=callgrind --instr-atstart=no \
            --callgrind-out-file="$BASE/${name//\//-}.cg"
        bench=(sysbench oltp_write_only "${SB_ARGS[@]}" --mysql-port="${PORT[$name]}" --threads="$THREADS" --time=0)
        "${bench[@]}" --events=80 run >/dev/null 2>&1 || log "sysbench warm-up against $name failed"
        ir=$(callgrind_total "${PID[$name]}" "$BASE/${name//\//-}.cg" "${bench[@]}" --events="$EVENTS" run)
        echo "- ${arg%%=*} $mode: $((ir / EVENTS))"
        kill -TERM "${PID[$name]}" 2>/dev/null || true
    done
done
