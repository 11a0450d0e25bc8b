#!/usr/bin/env bash
# perf/overload.sh - #41's overload line: at 2x the load the database can serve, goodput
# (successful transactions per second) stays >= 90% of the peak, the excess rejected early
# rather than timing out late.
#
# "What the database can serve" is a transaction pool of 8 connections running SQL (default
# `SELECT pg_sleep(0.02)`: 8 / 20 ms = 400 per second, a database bound by its connections, not
# by this shared host's CPU, which the load generator and the proxies need). perf/overload.py
# first measures the peak through the router (32 clients back to back), then offers FACTOR x
# that peak open loop (Poisson arrivals, each on an idle client connection; a client gives up
# after TIMEOUT seconds, closing that connection as an application's statement timeout would),
# through each router variant and PgBouncer (pool of 8), rounds interleaved. Per run: goodput,
# its share of the peak, rejections by SQLSTATE with their median latency, late timeouts, the
# statements the database ran (runs nobody waited for any
# more are the waste that sinks goodput; counted by a sequence the default SQL advances),
# success latency; then medians [min-max].
#
#   perf/overload.sh [SECONDS] [ROUNDS]      (defaults 15, 3)
# Environment: QP_BIN=path (else a release build); CORES ("0, 1"); SQL; TIMEOUT (1.0);
# FACTOR (2); ACQUIRE ("500ms": the router's acquire_timeout, set below the client's TIMEOUT as
# tuning.md advises; "30s" shows the default's late timeouts); TARGETS ("router pgbouncer");
# QP_BASE=path also runs that router binary as target "base" (e.g. a build before a change), on
# the same configuration, in the same interleaved rounds.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/perf/lib.sh"
SECS=${1:-15} ROUNDS=${2:-3}
SQL=${SQL:-"SELECT nextval('ran'), pg_sleep(0.02)"} TIMEOUT=${TIMEOUT:-1.0} FACTOR=${FACTOR:-2} ACQUIRE=${ACQUIRE:-500ms}
TARGETS=${TARGETS:-router ${QP_BASE:+base }pgbouncer}
ulimit -n 65536 2>/dev/null || true

if [ -n "${QP_BIN:-}" ]; then BIN=$QP_BIN; else build_router; fi
start_pg_pgbench qp-over bench 1
PORT=$(free_port)
PGB_PORT=$(free_port)
bench_config "$PORT" "${CORES:-0, 1}" md5 8 | sed "s/^acquire_timeout = .*/acquire_timeout = \"$ACQUIRE\"/" \
    >"$BASE/querypilot.toml"
# PgBouncer's query_wait_timeout is the router's acquire_timeout (seconds, fractions allowed).
acquire_s=$(python3 -c "import re,sys; v,u=re.fullmatch(r'([0-9.]+)(ms|s)','$ACQUIRE').groups(); print(float(v)/(1000 if u=='ms' else 1))")
PGB_EXTRA="max_client_conn = 5000
query_wait_timeout = $acquire_s" start_pgbouncer "$BASE/pgbouncer" bench "$PGB_PORT" 8
BASE_PID=""
trap 'kill "$PGB_PID" $BASE_PID 2>/dev/null || true; perf_cleanup' EXIT
start_base_router "$PORT"
start_router "$BASE/querypilot.toml" "$PORT"
GEN=(/usr/bin/python3 "$ROOT/perf/overload.py")
ARGS=(127.0.0.1 "$PG_USER" "$PGPASSWORD" bench --sql "$SQL" --seconds "$SECS")

# executed: how many times the database ran the default SQL (its sequence, advanced outside any
# transaction, so a statement counts whether or not anybody still waited for its answer).
psql_bench() { "$PG_BIN/psql" -X -qAt -h "$PG_HOST" -p "$PG_PRIMARY_PORT" -U "$PG_USER" -d bench -c "$1"; }
psql_bench "CREATE SEQUENCE ran"
executed() { psql_bench "SELECT last_value FROM ran"; }

peak=$("${GEN[@]}" peak "${ARGS[0]}" "$PORT" "${ARGS[@]:1}" --workers 32 | python3 -c 'import json,sys; print(json.load(sys.stdin)["tps"])')
rate=$(python3 -c "print(round($peak * $FACTOR, 1))")
log "peak through the router: $peak tx/s; offering $rate tx/s (x$FACTOR), client timeout ${TIMEOUT}s, router acquire_timeout $ACQUIRE"
echo "peak $peak offered $rate"
: >"$BASE/figures"
for r in $(seq "$ROUNDS"); do
    for target in $TARGETS; do
        case $target in pgbouncer) port=$PGB_PORT ;; base) port=$BASE_PORT ;; *) port=$PORT ;; esac
        before=$(executed)
        out=$("${GEN[@]}" offer "${ARGS[0]}" "$port" "${ARGS[@]:1}" --rate "$rate" --timeout "$TIMEOUT")
        ran=$(($(executed) - before))
        load=$(cut -d' ' -f1 /proc/loadavg)
        echo "$target $out" >>"$BASE/figures"
        python3 - "$target" "$peak" "$ran" "$load" "$out" <<'PY'
import json, sys
t, peak, ran, load, o = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], json.loads(sys.argv[5])
print(f"{t:10} goodput {o['goodput_tps']:7.1f} ({100 * o['goodput_tps'] / peak:5.1f}% of peak)  ok {o['ok']}"
      f"  rejected {o['rejected']} in {o['rejected_p50_ms']} ms (p50)  late timeouts {o['late_timeouts']}"
      f"  client-busy drops {o['client_busy_drops']}  db ran {ran}  ok p50/p99 {o['ok_p50_ms']}/{o['ok_p99_ms']} ms  load {load}")
PY
    done
done
python3 - "$BASE/figures" "$peak" <<'PY'
import json, statistics, sys
peak = float(sys.argv[2])
runs = {}
for line in open(sys.argv[1]):
    t, o = line.split(" ", 1)
    runs.setdefault(t, []).append(json.loads(o))
print("median [min-max] over the rounds")
for t, rs in runs.items():
    g = [100 * r["goodput_tps"] / peak for r in rs]
    late = [r["late_timeouts"] for r in rs]
    rej = [sum(r["rejected"].values()) for r in rs]
    fmt = lambda v: f"{statistics.median(v):.1f} [{min(v):.1f}-{max(v):.1f}]"
    print(f"{t:10} goodput % of peak {fmt(g)}  rejected {fmt(rej)}  late timeouts {fmt(late)}")
PY
