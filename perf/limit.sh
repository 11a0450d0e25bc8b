#!/usr/bin/env bash
# perf/limit.sh - one hot query shape beside ordinary clients (#41's "Done when"): 64 clients
# fire a slow aggregate (`SELECT pg_sleep(0.02), count(*) FROM pgbench_accounts WHERE aid < N`)
# at a transaction pool of 8 while pgbench -S runs 8 ordinary clients through the same pool.
# Prints the ordinary clients' p99 without the bad shape, with it and the limiter off, and with
# it and `adaptive_limit = true`; for the bad shape, how many ran and how many got 53000, and
# the limit the router learned for it (GET /api/limits, sampled during the run).
#
#   perf/limit.sh [SECONDS] [BAD_CLIENTS] [ROUNDS]     (defaults 10, 64, 1)
# Environment: QP_BIN=path runs that router binary instead of building a release one;
# LIMIT_WAIT (default 100ms) is the pool's limit_wait with the limiter on.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/perf/lib.sh"
SECS=${1:-10} BAD=${2:-64} ROUNDS=${3:-1} CLIENTS=8

if [ -n "${QP_BIN:-}" ]; then BIN=$QP_BIN; else build_router; fi
start_pg_pgbench qp-limit bench 10
PORT=$(free_port)
METRICS=$(free_port)
while [ "$METRICS" = "$PORT" ] || [ "$((METRICS + 1))" = "$PORT" ]; do METRICS=$(free_port); done

# config LIMITER_LINES: one core, pool `bench` of 8 on the primary, transaction pooling; MD5
# keeps the bad shape's 64 logins cheap: the run measures statements, not logins.
config() {
    bench_config "$PORT" 0 md5 8 "$1"
    printf '[metrics]\nenabled = true\nbind = "127.0.0.1:%s"\n' "$METRICS"
}

cat >"$BASE/bad.py" <<'PY'
import random, sys, threading, time
import psycopg
dsn, clients, until = sys.argv[1], int(sys.argv[2]), time.time() + float(sys.argv[3])
counts = {"ran": 0}
lock = threading.Lock()
def client():
    with psycopg.connect(dsn, autocommit=True) as c:
        while time.time() < until:
            try:
                c.execute("SELECT pg_sleep(0.02), count(*) FROM pgbench_accounts WHERE aid < %s" % random.randint(1, 10000))
                key = "ran"
            except psycopg.Error as e:
                key = e.sqlstate or "error"
                if key == "53000":
                    time.sleep(0.01)  # an application backing off a refusal
            with lock:
                counts[key] = counts.get(key, 0) + 1
threads = [threading.Thread(target=client) for _ in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())))
PY

# p99 of pgbench -S through the router, in ms, from its per-transaction log.
p99() {
    rm -f "$BASE"/pgb.*
    pgbench -n -S -M prepared -c "$CLIENTS" -j 2 -T "$SECS" -l --log-prefix="$BASE/pgb" \
        -h 127.0.0.1 -p "$PORT" -U "$PG_USER" bench >"$BASE/pgbench.out" 2>&1 ||
        log "pgbench failed: $(grep -m1 -i error "$BASE/pgbench.out")"
    cat "$BASE"/pgb.* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int(NR*0.99)]/1000}'
}

cat >"$BASE/limits.py" <<'PY'
import json, sys
v = json.load(sys.stdin)
shapes = [s for p in v["pools"] for s in p["shapes"]]
bad = [s for s in shapes if "pg_sleep" in s["statement"]]
normal = [s for s in shapes if "abalance" in s["statement"]]
show = lambda rows: ",".join("%d/%d/%d" % (s["limit"], s["in_use"], s["queued"]) for s in rows) or "-"
print("%s|%s" % (show(bad), show(normal)), end=" ")
PY

# The bad shape's and pgbench's rows of GET /api/limits, every second while pgbench runs:
# "limit/in_use/queued" of each, bad|pgbench.
sample_limits() {
    local end=$((SECONDS + SECS)) out=""
    while [ "$SECONDS" -lt "$end" ]; do
        sleep 1
        out+=$(curl -s "http://127.0.0.1:$((METRICS + 1))/api/limits" | /usr/bin/python3 "$BASE/limits.py" 2>/dev/null ||
            echo -n "? ")
    done
    echo "$out"
}

# run NAME LIMITER_LINES BAD_CLIENTS: one router, pgbench's p99 with BAD_CLIENTS bad clients.
run() {
    local name=$1 lines=$2 bad=$3 lat badpid="" sampler="" told="-" limits="-"
    config "$lines" >"$BASE/querypilot.toml"
    start_router "$BASE/querypilot.toml" "$PORT"
    local dsn="host=127.0.0.1 port=$PORT dbname=bench user=$PG_USER password=$PG_PASSWORD"
    if [ "$bad" -gt 0 ]; then
        /usr/bin/python3 "$BASE/bad.py" "$dsn" "$bad" "$((SECS + 3))" >"$BASE/bad.out" 2>&1 &
        badpid=$!
        sleep 2 # the bad shape's clients connected and the pool full of it
    fi
    if [ -n "$badpid" ] && [[ "$lines" == *adaptive* ]]; then
        sample_limits >"$BASE/limits.out" &
        sampler=$!
    fi
    lat=$(p99)
    if [ -n "$badpid" ]; then
        wait "$badpid" || true
        told=$(tail -1 "$BASE/bad.out")
    fi
    [ -z "$sampler" ] || wait "$sampler"
    [ -s "$BASE/limits.out" ] && limits=$(cat "$BASE/limits.out") && rm -f "$BASE/limits.out"
    kill -TERM "$ROUTER_PID"
    wait "$ROUTER_PID" 2>/dev/null || true
    ROUTER_PID=""
    printf '%-12s %8s  bad: %s  limit/in_use/queued each second (bad|pgbench): %s\n' "$name" "$lat" "$told" "$limits"
    echo "$name $lat" >>"$BASE/figures"
}

: >"$BASE/figures"
log "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-12s %8s\n' case p99_ms
for r in $(seq "$ROUNDS"); do
    run no-bad "" 0
    run limiter-off "" "$BAD"
    run limiter-on "adaptive_limit = true
limit_wait = \"${LIMIT_WAIT:-100ms}\"" "$BAD"
done
log "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$BASE/figures" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, p99 = line.split()
    runs.setdefault(name, []).append(float(p99))
base = statistics.median(runs["no-bad"])
for name, v in runs.items():
    m = statistics.median(v)
    print(f"{name:12} median p99 {m:8.2f} ms [{min(v):.2f}-{max(v):.2f}]  x{m / base:.2f} of no-bad")
PY
