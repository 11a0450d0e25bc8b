#!/usr/bin/env bash
# raw-passthrough.sh - what `raw_passthrough = true` saves against the decoded path (issue #10):
# pgbench -M prepared through one router process with two pools on the same database, `dec`
# (raw_passthrough = false) and `raw` (raw_passthrough = true), run alternately.
#
#   perf/raw-passthrough.sh [--no-build] [--callgrind | --strace]
#
# Starts its own PostgreSQL with tests/support/dbs.sh (free ports, torn down on exit), builds
# the router with `cargo build --release` (skip with --no-build), initializes pgbench data, then
# for ROUNDS rounds runs every workload against both pools (the order flips every round). A
# client picks the pool by database name, so the runs differ only in the flag. Per run: TPS from
# pgbench and the router's CPU time per transaction, utime+stime from /proc/PID/stat sampled
# right before and after the run. Prints the medians and the raw/dec ratios.
#
# --callgrind: instead of timed runs, the router runs under valgrind's callgrind and each
# workload runs once per pool with one client and a fixed number of transactions (TX_SELECT1,
# TX_ROWS100, TX_ROWS10K); prints the router's user-space instructions per transaction, which
# unlike CPU time do not depend on what else the machine runs (kernel work is not counted).
#
# --strace: the same fixed runs on the router as built, under `strace -c -f -p`; prints the
# router's system calls per transaction by name.
#
# Workloads (all -M prepared): select1 = pgbench -S (one row per transaction); rows100 = a
# script selecting 100 pgbench_accounts rows (~12 KB); rows10k = 10,000 rows (~1.2 MB).
#
# Environment (defaults): CLIENTS=8 JOBS=2 SECONDS_PER_RUN=8 ROUNDS=3 SCALE=2 POOL=4 CORES=1
# WORKLOADS="select1 rows100 rows10k"; with --callgrind, DUMPS=DIR keeps each run's profile
# there (for callgrind_annotate).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLIENTS=${CLIENTS:-8}
JOBS=${JOBS:-2}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-8}
ROUNDS=${ROUNDS:-3}
SCALE=${SCALE:-2}
POOL=${POOL:-4}
CORES=${CORES:-1}
WORKLOADS=${WORKLOADS:-select1 rows100 rows10k}

# shellcheck source=perf/lib.sh
. "$ROOT/perf/lib.sh"

BUILD=1; CALLGRIND=0; STRACE=0
for a in "$@"; do
    case $a in
        --no-build) BUILD=0 ;;
        --callgrind) CALLGRIND=1 ;;
        --strace) STRACE=1 ;;
        *) sed -n '2,25p' "$0" >&2; exit 2 ;;
    esac
done
build_router "$BUILD"
DB=pgbench_raw
start_pg_pgbench qp-raw "$DB" "$SCALE"
MAX_AID=$((SCALE * 100000))
cat >"$BASE/rows100.sql" <<EOF
\set a random(1, $MAX_AID - 99)
SELECT aid, bid, abalance, filler FROM pgbench_accounts WHERE aid BETWEEN :a AND :a + 99;
EOF
cat >"$BASE/rows10k.sql" <<EOF
\set a random(1, $MAX_AID - 9999)
SELECT aid, bid, abalance, filler FROM pgbench_accounts WHERE aid BETWEEN :a AND :a + 9999;
EOF

PORT=$(free_port)
CONF="$BASE/querypilot.toml"
pool() { # name flag
    cat <<EOF
[pools.$1]
mode = "transaction"
username = "$PG_USER"
password = "$PG_PASSWORD"
database = "$DB"
max_connections = $POOL
raw_passthrough = $2
backends = [{ host = "$PG_HOST", port = $PG_PRIMARY_PORT }]

EOF
}
{
    printf '[general]\ncores = [%s]\nlog_level = "warn"\n\n' "$(seq -s, 0 $((CORES - 1)))"
    # MD5 client logins: a SCRAM login costs as many instructions as 400 one-row transactions
    # and would blur --callgrind's per-transaction figures.
    printf '[[listeners]]\nprotocol = "postgres"\nbind = "127.0.0.1:%s"\nauth_method = "md5"\n\n' "$PORT"
    pool dec false
    pool raw true
    printf '[routing]\ndefault_pool = "dec"\n'
} >"$CONF"
if [ $CALLGRIND = 1 ]; then
    start_router "$CONF" "$PORT" valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$BASE/cg.out"
else
    start_router "$CONF" "$PORT"
fi

RESULTS="$BASE/results.tsv"
: >"$RESULTS"
run() { # workload pool round
    local args=(-n -M prepared -c "$CLIENTS" -j "$JOBS" -T "$SECONDS_PER_RUN" -h 127.0.0.1 -p "$PORT" -U "$PG_USER")
    case $1 in
        select1) args+=(-S) ;;
        *) args+=(-f "$BASE/$1.sql") ;;
    esac
    local t0 t1 out tps tx failed
    t0=$(cpu_ticks "$ROUTER_PID")
    out=$(pgbench "${args[@]}" "$2" 2>&1) || { printf '%s\n' "$out" >&2; exit 1; }
    t1=$(cpu_ticks "$ROUTER_PID")
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
    tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$tps" "$tx" "${failed:-0}" "$((t1 - t0))" >>"$RESULTS"
    log "round $3 $1 $2: tps $tps, $tx transactions, ${failed:-0} failed"
}

fixed_runs() { # label-printing loop over workloads and pools; $1 = command run around each
    for w in $WORKLOADS; do
        case $w in
            select1) a=(-S); n=${TX_SELECT1:-2000} ;;
            rows100) a=(-f "$BASE/$w.sql"); n=${TX_ROWS100:-1000} ;;
            *) a=(-f "$BASE/$w.sql"); n=${TX_ROWS10K:-30} ;;
        esac
        for p in dec raw; do "$1" "$w" "$p" "$n" "${a[@]}"; done
    done
}
strace_one() { # workload pool tx pgbench-args...
    local w=$1 p=$2 n=$3
    shift 3
    strace -f -c -o "$BASE/strace.txt" -p "$ROUTER_PID" 2>/dev/null &
    local st=$!
    sleep 1
    pgbench -n -M prepared -c 1 -t "$n" "$@" -h 127.0.0.1 -p "$PORT" -U "$PG_USER" "$p" >/dev/null
    kill -INT "$st"; wait "$st" 2>/dev/null || true
    python3 - "$BASE/strace.txt" "$w" "$p" "$n" <<'PY'
import sys
calls = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        calls[f[-1]] = int(f[3])
n = int(sys.argv[4])
top = sorted(calls.items(), key=lambda kv: -kv[1])[:5]
print(f"{sys.argv[2]:10} {sys.argv[3]:4} {n:6} {sum(calls.values()) / n:8.2f}  " + ", ".join(f"{k} {v / n:.2f}" for k, v in top))
PY
}
if [ $STRACE = 1 ]; then
    for p in dec raw; do
        pgbench -n -S -M prepared -c 1 -t 10 -h 127.0.0.1 -p "$PORT" -U "$PG_USER" "$p" >/dev/null
    done
    printf '\n%-10s %4s %6s %8s  %s\n' workload pool tx "calls/tx" "by name (per tx)"
    fixed_runs strace_one
    exit 0
fi
if [ $CALLGRIND = 1 ]; then
    for p in dec raw; do # warm-up: connections opened, statements prepared
        for w in $WORKLOADS; do
            case $w in select1) a=(-S) ;; *) a=(-f "$BASE/$w.sql") ;; esac
            pgbench -n -M prepared -c 1 -t 3 "${a[@]}" -h 127.0.0.1 -p "$PORT" -U "$PG_USER" "$p" >/dev/null
        done
    done
    callgrind_control -i on "$ROUTER_PID" >/dev/null 2>&1
    printf '\n%-10s %4s %6s %18s\n' workload pool tx "instructions/tx"
    for w in $WORKLOADS; do
        case $w in
            select1) a=(-S); n=${TX_SELECT1:-2000} ;;
            rows100) a=(-f "$BASE/$w.sql"); n=${TX_ROWS100:-1000} ;;
            *) a=(-f "$BASE/$w.sql"); n=${TX_ROWS10K:-30} ;;
        esac
        for p in dec raw; do
            callgrind_control -z "$ROUTER_PID" >/dev/null 2>&1
            pgbench -n -M prepared -c 1 -t "$n" "${a[@]}" -h 127.0.0.1 -p "$PORT" -U "$PG_USER" "$p" >/dev/null
            callgrind_control -d "$ROUTER_PID" >/dev/null 2>&1
            f=$(ls -t "$BASE"/cg.out* | head -1)
            ir=$(sed -n 's/^summary: \([0-9]*\).*/\1/p; s/^totals: \([0-9]*\).*/\1/p' "$f" | head -1)
            printf '%-10s %4s %6s %18s\n' "$w" "$p" "$n" "$((ir / n))"
            if [ -n "${DUMPS:-}" ]; then cp "$f" "$DUMPS/$w-$p.callgrind"; fi
        done
    done
    exit 0
fi

# Warm-up, not recorded: both pools open their connections and prepare their statements.
for p in dec raw; do
    pgbench -n -S -M prepared -c "$CLIENTS" -j "$JOBS" -T 2 -h 127.0.0.1 -p "$PORT" -U "$PG_USER" "$p" >/dev/null 2>&1
done
for round in $(seq "$ROUNDS"); do
    for w in $WORKLOADS; do
        if [ $((round % 2)) = 1 ]; then order="dec raw"; else order="raw dec"; fi
        for p in $order; do run "$w" "$p" "$round"; done
    done
done

python3 - "$RESULTS" "$(getconf CLK_TCK)" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
hz = int(sys.argv[2])
by = {}
for w, p, r, tps, tx, failed, ticks in rows:
    by.setdefault((w, p), []).append((float(tps), int(tx), int(failed), int(ticks) / hz / int(tx) * 1e6))
print(f"\n{'workload':10} {'pool':4} {'runs':>4} {'median tps':>11} {'tps per run':>28} {'failed':>6} {'CPU us/tx':>10} {'per run':>22}")
workloads = list(dict.fromkeys(w for w, _ in by))
for w in workloads:
    med = {}
    for p in ("dec", "raw"):
        runs = by.get((w, p), [])
        if not runs:
            continue
        tps = statistics.median(t for t, _, _, _ in runs)
        cpu = statistics.median(c for _, _, _, c in runs)
        med[p] = (tps, cpu)
        each_tps = " ".join(f"{t:.0f}" for t, _, _, _ in runs)
        each_cpu = " ".join(f"{c:.1f}" for _, _, _, c in runs)
        print(f"{w:10} {p:4} {len(runs):4} {tps:11.0f} {each_tps:>28} {sum(f for _, _, f, _ in runs):6} {cpu:10.1f} {each_cpu:>22}")
    if len(med) == 2:
        print(f"{w:10} raw/dec: tps x{med['raw'][0] / med['dec'][0]:.3f}, CPU/tx x{med['raw'][1] / med['dec'][1]:.3f}")
EOF
