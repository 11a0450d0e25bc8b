#!/usr/bin/env bash
# perf/cpu_split.sh - where a proxy's CPU per transaction goes, user space against kernel (#39):
# routers and PgBouncer on one core, measured in one run in interleaved rounds (the order rotated
# each round), `pgbench -S` through each in simple and extended mode with 16 clients and with 1.
#
#   perf/cpu_split.sh [NAME=BINARY ...]      (default: built=<a release build of this tree>)
#
# Per target and load: TPS, utime and stime per transaction in µs (deltas of /proc/PID/stat
# over the run, so every thread of the process: the loop's, any io_uring worker's, and the
# softirq work of loopback delivery the kernel bills to the sender), as medians with min–max
# over the rounds. Then, in one extra pass that is left out of the CPU figures (counting adds
# a little to every event counted), per transaction: system calls, io_uring_enter calls,
# context switches, and the io_uring events that cost kernel work — a request punted to a worker
# thread (queue_async_work) and a receive or send that found the socket not ready and armed a
# poll (poll_arm) — from `perf stat` on the process's tracepoints.
#
# With FLOOR=1, two proxies that do no work join them, the floors of #39's CPU lines: `rt-forward`
# (examples/rt_forward.rs: the router's own io_uring runtime on CPU 0, copying bytes between each
# client and a backend connection of its own) and `haproxy` (HAProxy in TCP mode, one thread, the
# field's byte copier on epoll). Both forward 1:1: at 16 clients they hold 16 server connections,
# where the routers and PgBouncer share a pool of POOL; the table's `server conns` column says
# which. The router's CPU per transaction minus rt-forward's is the router's own work on top of
# its runtime and the kernel's loopback path.
#
# Environment (defaults): ROUNDS=3 SECS=5 (per pgbench run) POOL=8 LOADS="simple:16
# extended:16 simple:1 extended:1" PGBOUNCER=1 (0: routers only) COUNTS=1 (0: no counting pass)
# PIN_PGBOUNCER=1 (run PgBouncer, and HAProxy, under `taskset -c 0`, the CPU the routers'
# `cores = [0]` pins their loop to) FLOOR=0 (1: add rt-forward and haproxy) FLOOR_BIN (an
# rt_forward binary; default: `cargo build --release --example rt_forward` of this tree)
# RAW_KEEP (a file to keep the raw figures in, one row per pgbench run, for pooling runs).
# The 1-minute load average is sampled before each pgbench run and reported (min–max): the
# host's other work shows in the µs figures, not in the counts.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=perf/lib.sh
. "$ROOT/perf/lib.sh"
ROUNDS=${ROUNDS:-3} SECS=${SECS:-5} POOL=${POOL:-8} PGBOUNCER=${PGBOUNCER:-1} COUNTS=${COUNTS:-1} FLOOR=${FLOOR:-0}
LOADS=${LOADS:-simple:16 extended:16 simple:1 extended:1} PIN_PGBOUNCER=${PIN_PGBOUNCER:-1}
EVENTS=raw_syscalls:sys_enter,syscalls:sys_enter_io_uring_enter,context-switches,io_uring:io_uring_queue_async_work,io_uring:io_uring_poll_arm

if [ $# -eq 0 ]; then
    build_router
    set -- "built=$BIN"
fi
if [ "$FLOOR" = 1 ]; then
    if [ -n "${FLOOR_BIN:-}" ]; then
        EXAMPLE_BIN=$FLOOR_BIN
    else
        build_example rt_forward
    fi
    FORWARD_BIN=$EXAMPLE_BIN
fi
DB=pgbench_split
start_pg_pgbench qp-cpu-split "$DB" 10
declare -A PORT PID
TARGETS=()
PIDS=()
trap pids_then_perf_cleanup EXIT

for arg in "$@"; do
    name=${arg%%=*} BIN=${arg#*=}
    PORT[$name]=$(free_port)
    md5_pool_config "${PORT[$name]}" 0 "$DB" "$POOL" >"$BASE/$name.toml"
    start_router "$BASE/$name.toml" "${PORT[$name]}"
    PID[$name]=$ROUTER_PID
    PIDS+=("$ROUTER_PID")
    ROUTER_PID=""
    TARGETS+=("$name")
done
pin=()
[ "$PIN_PGBOUNCER" = 1 ] && pin=(taskset -c 0)
if [ "$PGBOUNCER" = 1 ]; then
    PORT[pgbouncer]=$(free_port)
    PGB_EXTRA="log_stats = 0" start_pgbouncer "$BASE/pgbouncer" "$DB" "${PORT[pgbouncer]}" "$POOL" "${pin[@]}"
    PID[pgbouncer]=$PGB_PID
    PIDS+=("$PGB_PID")
    TARGETS+=(pgbouncer)
fi
# Targets that hold one server connection per client (no pool).
ONE_TO_ONE=()
if [ "$FLOOR" = 1 ]; then
    PORT[rt-forward]=$(free_port)
    "$FORWARD_BIN" "127.0.0.1:${PORT[rt-forward]}" "$PG_HOST:$PG_PRIMARY_PORT" 0 >"$BASE/rt-forward.log" 2>&1 &
    PID[rt-forward]=$!
    PIDS+=("$!")
    wait_pg_port "${PORT[rt-forward]}" "see $BASE/rt-forward.log"
    PORT[haproxy]=$(free_port)
    start_haproxy_tcp "$BASE/haproxy" "${PORT[haproxy]}" "$PG_HOST:$PG_PRIMARY_PORT" "${pin[@]}"
    wait_pg_port "${PORT[haproxy]}" "see $BASE/haproxy/haproxy.log"
    PID[haproxy]=$HAPROXY_PID
    PIDS+=("$HAPROXY_PID")
    TARGETS+=(rt-forward haproxy)
    ONE_TO_ONE+=(rt-forward haproxy)
fi

# utime and stime of PID in clock ticks (fields 14 and 15 of /proc/PID/stat), tab-separated.
split_ticks() {
    local s f
    s=$(cat "/proc/$1/stat")
    s=${s##*) }
    read -r -a f <<<"$s"
    printf '%s\t%s\n' "${f[11]}" "${f[12]}"
}

# bench TARGET LOAD: one pgbench run; prints "transactions<TAB>tps".
bench() {
    local mode=${2%%:*} clients=${2#*:} out
    out=$(pgbench -n -S -M "$mode" -c "$clients" -j $((clients < 2 ? 1 : 2)) -T "$SECS" \
        -h 127.0.0.1 -p "${PORT[$1]}" -U "$PG_USER" "$DB" 2>&1) || { log "pgbench failed: $1 $2: $(tail -n 1 <<<"$out")"; echo "0	0"; return; }
    awk '/actually processed/{n=$NF} /^tps/{t=$3} END {printf "%s\t%s\n", n, t}' <<<"$out"
}

RAW="$BASE/raw.tsv"; : >"$RAW"
log "warm-up"
for t in "${TARGETS[@]}"; do bench "$t" simple:16 >/dev/null; done
for round in $(seq 1 "$ROUNDS"); do
    for load in $LOADS; do
        n=${#TARGETS[@]}
        for i in $(seq 0 $((n - 1))); do
            t=${TARGETS[$(((i + round) % n))]}
            log "round $round/$ROUNDS: $load, $t"
            printf 'load\t%s\n' "$(cut -d' ' -f1 /proc/loadavg)" >>"$RAW"
            IFS=$'\t' read -r u0 s0 < <(split_ticks "${PID[$t]}")
            IFS=$'\t' read -r tx tps < <(bench "$t" "$load")
            IFS=$'\t' read -r u1 s1 < <(split_ticks "${PID[$t]}")
            printf 'cpu\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$load" "$tx" "$tps" $((u1 - u0)) $((s1 - s0)) "$round" >>"$RAW"
        done
    done
done
if [ "$COUNTS" = 1 ]; then
    for load in $LOADS; do
        for t in "${TARGETS[@]}"; do
            log "counting: $load, $t"
            perf stat -x, -e "$EVENTS" -p "${PID[$t]}" -o "$BASE/stat.csv" &
            st=$!
            sleep 0.5
            IFS=$'\t' read -r tx _ < <(bench "$t" "$load")
            kill -INT "$st"
            wait "$st" 2>/dev/null || true
            # perf's CSV: count,unit,event,...
            awk -F, -v t="$t" -v l="$load" -v tx="$tx" \
                '$3 != "" && $1 ~ /^[0-9]+$/ {printf "count\t%s\t%s\t%s\t%s\t%s\n", t, l, tx, $3, $1}' "$BASE/stat.csv" >>"$RAW"
        done
    done
fi

[ -z "${RAW_KEEP:-}" ] || cp "$RAW" "$RAW_KEEP"
python3 - "$RAW" "$(getconf CLK_TCK)" "$POOL" "${ONE_TO_ONE[*]}" <<'PY'
import statistics, sys
raw, hz, pool = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
one_to_one = set(sys.argv[4].split())
cpu, counts, order, loadavg, by_round = {}, {}, [], [], {}
for line in open(raw):
    f = line.rstrip("\n").split("\t")
    if f[0] == "load":
        loadavg.append(float(f[1]))
        continue
    key = (f[1], f[2])
    if key not in order:
        order.append(key)
    if f[0] == "cpu" and int(f[3]) > 0:
        tx = int(f[3])
        us = 1e6 / hz / tx
        cpu.setdefault(key, []).append((float(f[4]), int(f[5]) * us, int(f[6]) * us))
        by_round.setdefault(key, {})[f[7]] = (int(f[5]) + int(f[6])) * us
    elif f[0] == "count" and int(f[3]) > 0:
        counts.setdefault(key, {})[f[4]] = int(f[5]) / int(f[3])

def span(v, fmt):
    return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))})"

def total(target, load):
    """Median CPU µs per transaction of TARGET under LOAD, or None if it was not measured."""
    rows = cpu.get((target, load))
    return statistics.median(u + s for _, u, s in rows) if rows else None

def conns(target, load):
    clients = int(load.split(":")[1])
    return f"1:1 ({clients})" if target in one_to_one else f"pool {pool}"

def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"

def paired(target, load):
    """TARGET's CPU per transaction over PgBouncer's in the same round, median (min–max): the
    two ran minutes apart at most, so a host load that drifts between rounds cancels out."""
    a, b = by_round.get((target, load), {}), by_round.get(("pgbouncer", load), {})
    v = [a[r] / b[r] for r in a if b.get(r)]
    return span(v, "{:.2f}") if v else "-"

loads = list(dict.fromkeys(k[1] for k in order))
floor = any(k[0] == "rt-forward" for k in cpu)
print("| load | target | server conns | TPS | utime µs/tx | stime µs/tx | CPU µs/tx | ÷ PgBouncer |"
      + (" ÷ rt-forward |" if floor else ""))
print("|---|---|---|---:|---:|---:|---:|---:|" + ("---:|" if floor else ""))
for load in loads:
    for key in [k for k in order if k[1] == load and k in cpu]:
        rows = cpu[key]
        cells = [load, key[0], conns(key[0], load), span([r[0] for r in rows], "{:.0f}"),
                 span([r[1] for r in rows], "{:.1f}"), span([r[2] for r in rows], "{:.1f}"),
                 span([u + s for _, u, s in rows], "{:.1f}"), ratio(total(*key), total("pgbouncer", load))]
        if floor:
            cells.append(ratio(total(*key), total("rt-forward", load)))
        print("| " + " | ".join(cells) + " |")
routers = [t for t in dict.fromkeys(k[0] for k in order) if t != "pgbouncer" and t not in one_to_one]
if floor and routers and any(k[0] == "pgbouncer" for k in cpu):
    # The router's gap to PgBouncer = (floor − PgBouncer: the runtime and kernel path any proxy
    # on it pays) + (router − floor: the router's own work). Medians, so the terms add up only
    # roughly.
    print()
    print("| load | router | router − PgBouncer µs/tx | rt-forward − PgBouncer | router − rt-forward (own work) "
          "| ÷ PgBouncer, same round: router | rt-forward | haproxy |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for load in loads:
        pgb, fwd = total("pgbouncer", load), total("rt-forward", load)
        for r in routers:
            own = total(r, load)
            if None in (pgb, fwd, own):
                continue
            print(f"| {load} | {r} | {own - pgb:+.1f} | {fwd - pgb:+.1f} | {own - fwd:+.1f} | {paired(r, load)} "
                  f"| {paired('rt-forward', load)} | {paired('haproxy', load)} |")
if loadavg:
    print()
    print(f"1-minute load average before each pgbench run: median {statistics.median(loadavg):.2f} "
          f"({min(loadavg):.2f}–{max(loadavg):.2f})")
if counts:
    names = [("raw_syscalls:sys_enter", "syscalls"), ("syscalls:sys_enter_io_uring_enter", "io_uring_enter"),
             ("context-switches", "context switches"), ("io_uring:io_uring_queue_async_work", "io-wq punts"),
             ("io_uring:io_uring_poll_arm", "poll arms")]
    print()
    print("| load | target | " + " | ".join(n for _, n in names) + " (per tx, one pass) |")
    print("|---|---|" + "---:|" * len(names))
    for key in order:
        if key in counts:
            c = counts[key]
            print(f"| {key[1]} | {key[0]} | " + " | ".join(f"{c.get(e, 0):.2f}" for e, _ in names) + " |")
PY
