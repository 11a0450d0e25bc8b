#!/usr/bin/env bash
# perf/run.sh - the side-by-side table: direct server, PgBouncer and QueryPilot on one core and on
# two, measured in one run on this machine in interleaved rounds (the order rotated each round).
#
#   perf/run.sh [--quick] [--rounds N] [--duration S] [--idle N] [--no-mysql] [--no-counts] [--full]
#
# Starts its own PostgreSQL and MariaDB (tests/support/dbs.sh), builds QueryPilot (release) and
# runs it twice at once, `cores = [0]` (as PgBouncer runs on one thread) and `cores = [0, 1]`,
# both in transaction pooling with 8 server connections and md5 client logins, like PgBouncer
# beside them. Per round: `pgbench -S` in simple, extended and prepared mode with 1 and 16
# clients and the prepared TPC-B script with 16 (--full: also 128 clients and TPC-B in simple
# mode), then `sysbench oltp_point_select` and `oltp_read_only` (16 threads) against MariaDB
# direct, both routers and, when installed, HAProxy in TCP mode on one thread: a proxy that only
# copies bytes, the floor for any proxy on this machine. Reported per configuration: median TPS
# with min–max, p50/p99 latency, the proxy's CPU per transaction (utime+stime, /proc/PID/stat),
# the whole host's busy CPU per transaction (/proc/stat: load generator, database and proxy
# together) and the proxy's RSS. Then system calls (strace) and user-space instructions
# (callgrind) per transaction of each proxy on one core, the memory of idle clients held open
# through the one-core router and its latency meanwhile, and issue #39's targets checked against
# the medians. All of it goes into perf/RESULTS.md between the run.sh markers.
# QP_BIN=PATH measures that binary instead of building one. Defaults: 3 rounds of 10 s, 10,000
# idle clients (~25 minutes). --quick: one round of 3 s, 1,000 idle clients, no
# strace/callgrind, select scenarios only (~4 minutes).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
QUICK=0; ROUNDS=3; DURATION=10; IDLE=10000; MYSQL=1; COUNTS=1; FULL=0
POOL=8 STRACE_TX=1250 CALLGRIND_TX=200
while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=1; ROUNDS=1; DURATION=3; IDLE=1000; COUNTS=0; shift ;;
        --rounds) ROUNDS=${2:?}; shift 2 ;;
        --duration) DURATION=${2:?}; shift 2 ;;
        --idle) IDLE=${2:?}; shift 2 ;;
        --no-mysql) MYSQL=0; shift ;;
        --no-counts) COUNTS=0; shift ;;
        --full) FULL=1; shift ;;
        *) sed -n '2,23p' "$0" >&2; exit 2 ;;
    esac
done
# shellcheck source=perf/lib.sh
. "$ROOT/perf/lib.sh"

bash "$ROOT/.ci/deps.sh"
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
if [ -n "${QP_BIN:-}" ]; then
    log "using $QP_BIN"
else
    build_router
    QP_BIN=$BIN
fi

BASE=$(mktemp -d /tmp/qp-perf-run-XXXXXX)
rmdir "$BASE"
what=all; [ $MYSQL = 1 ] || what=pg
log "starting the databases under $BASE"
eval "$("$ROOT/tests/support/dbs.sh" up "$BASE" --what $what --owner-pid $$)"
export PGPASSWORD=$PG_PASSWORD
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    "$ROOT/tests/support/dbs.sh" down "$BASE" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM
ulimit -n 65536 2>/dev/null || log "cannot raise the open-file limit: the idle-client check may fall short"

DB=pgbench_run
"$PG_BIN/psql" -X -q -h "$PG_HOST" -p "$PG_PRIMARY_PORT" -U "$PG_SUPERUSER" -d postgres -c "CREATE DATABASE $DB OWNER $PG_USER"
SCALE=10; [ $QUICK = 1 ] && SCALE=2
log "pgbench -i -s $SCALE"
pgbench -q -i -s $SCALE -h 127.0.0.1 -p "$PG_PRIMARY_PORT" -U "$PG_USER" "$DB" >/dev/null 2>&1
SB_ARGS=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-user="${MY_USER:-}" --mysql-password="${MY_PASSWORD:-}"
    --mysql-db="${MY_DATABASE:-}" --tables=4 --table-size=10000)
if [ $MYSQL = 1 ]; then
    log "sysbench prepare"
    sysbench oltp_read_only "${SB_ARGS[@]}" --mysql-port="$MY_PRIMARY_PORT" prepare >/dev/null
fi

declare -A PORT MYPORT PID
PG_TARGETS=(direct)
MY_TARGETS=(direct)
PORT[direct]=$PG_PRIMARY_PORT
MYPORT[direct]=${MY_PRIMARY_PORT:-}

# start_qp NAME CORES [LAUNCHER...]: a router on CORES with a PostgreSQL and a MySQL listener.
start_qp() {
    local name=$1 cores=$2
    shift 2
    PORT[$name]=$(free_port)
    MYPORT[$name]=$(free_port)
    cat >"$BASE/$name.toml" <<TOML
[general]
cores = [$cores]
shutdown_drain = "1s"
log_level = "warn"
[[listeners]]
protocol = "postgres"
bind = "127.0.0.1:${PORT[$name]}"
# PgBouncer's client authentication: a SCRAM login (4096 PBKDF2 rounds) costs more than a
# thousand transactions' relaying, which would bill the proxies unequally.
auth_method = "md5"
[[listeners]]
protocol = "mysql"
bind = "127.0.0.1:${MYPORT[$name]}"
[pools.pg_primary]
mode = "transaction"
username = "$PG_USER"
password = "$PG_PASSWORD"
database = "$DB"
max_connections = $POOL
backends = [{ host = "127.0.0.1", port = $PG_PRIMARY_PORT }]
TOML
    if [ $MYSQL = 1 ]; then
        cat >>"$BASE/$name.toml" <<TOML
[pools.my_primary]
mode = "transaction"
username = "$MY_USER"
password = "$MY_PASSWORD"
database = "$MY_DATABASE"
max_connections = $POOL
backends = [{ host = "127.0.0.1", port = $MY_PRIMARY_PORT }]
TOML
    fi
    cat >>"$BASE/$name.toml" <<TOML
[routing]
# Pool names differ from the database names on purpose: a client's database name selects the
# pool of that name first.
default_pool = "pg_primary"
$([ $MYSQL = 1 ] && echo 'mysql_default_pool = "my_primary"' || true)
TOML
    "$@" "$QP_BIN" -c "$BASE/$name.toml" >"$BASE/$name.log" 2>&1 &
    PID[$name]=$!
    PIDS+=("$!")
    wait_pg_port "${PORT[$name]}"
}

start_qp querypilot-1c 0
start_qp querypilot-2c 0,1
PG_TARGETS+=(querypilot-1c querypilot-2c)
[ $MYSQL = 1 ] && MY_TARGETS+=(querypilot-1c querypilot-2c)
if command -v pgbouncer >/dev/null; then
    PORT[pgbouncer]=$(free_port)
    start_pgbouncer "$BASE/pgbouncer" "$DB" "${PORT[pgbouncer]}" "$POOL"
    PID[pgbouncer]=$PGB_PID
    PIDS+=("$PGB_PID")
    PG_TARGETS+=(pgbouncer)
fi
if [ $MYSQL = 1 ] && command -v haproxy >/dev/null; then
    MYPORT[haproxy]=$(free_port)
    start_haproxy_tcp "$BASE/haproxy" "${MYPORT[haproxy]}" "127.0.0.1:$MY_PRIMARY_PORT"
    PID[haproxy]=$HAPROXY_PID
    PIDS+=("$HAPROXY_PID")
    MY_TARGETS+=(haproxy)
fi

pid_ticks() { [ -n "${PID[$1]:-}" ] && cpu_ticks "${PID[$1]}" || echo 0; }
rss_kib() { [ -n "${PID[$1]:-}" ] && awk '/VmRSS/{print $2}' "/proc/${PID[$1]}/status" || echo 0; }
RAW="$BASE/raw.tsv"; : >"$RAW"
COUNTS_TSV="$BASE/counts.tsv"; : >"$COUNTS_TSV"

# run_pgbench TARGET SCENARIO CLIENTS [LABEL]: one pgbench run, one row of $RAW.
run_pgbench() {
    local target=$1 scenario=$2 clients=$3 label=${4:-$1} mode=${2%%-*} script=${2#*-}
    local args=(-n -h 127.0.0.1 -p "${PORT[$target]}" -U "$PG_USER" -M "$mode" -c "$clients" -j $((clients < 2 ? 1 : 2))
        -T "$DURATION" -l --sampling-rate=0.2 --log-prefix="$BASE/lat")
    [ "$script" = select ] && args+=(-S)
    rm -f "$BASE"/lat.*
    local t0 h0 t1 h1 out
    t0=$(pid_ticks "$target"); h0=$(host_busy_ticks)
    out=$(cd "$BASE" && pgbench "${args[@]}" "$DB" 2>&1) || { log "pgbench failed: $label $scenario $clients: $(tail -n 1 <<<"$out")"; return 0; }
    t1=$(pid_ticks "$target"); h1=$(host_busy_ticks)
    python3 "$ROOT/perf/parse.py" pgbench "$label" "$scenario" "$clients" "$t0" "$t1" "$h0" "$h1" "$(rss_kib "$target")" "$BASE" >>"$RAW" <<<"$out"
}

# run_sysbench TARGET TEST: one sysbench run, one row of $RAW.
run_sysbench() {
    local target=$1 test=$2 t0 h0 t1 h1 out
    t0=$(pid_ticks "$target"); h0=$(host_busy_ticks)
    out=$(sysbench "$test" "${SB_ARGS[@]}" --mysql-port="${MYPORT[$target]}" --threads=16 --time="$DURATION" --db-ps-mode=auto run 2>&1) ||
        { log "sysbench failed: $target $test: $(tail -n 1 <<<"$out")"; return 0; }
    t1=$(pid_ticks "$target"); h1=$(host_busy_ticks)
    python3 "$ROOT/perf/parse.py" sysbench "$target" "$test" "$t0" "$t1" "$h0" "$h1" "$(rss_kib "$target")" >>"$RAW" <<<"$out"
}

SCENARIOS=(simple-select extended-select prepared-select prepared-tpcb)
CLIENTS=(1 16)
[ $FULL = 1 ] && { SCENARIOS+=(simple-tpcb); CLIENTS+=(128); }
[ $QUICK = 1 ] && SCENARIOS=(simple-select extended-select prepared-select)
log "warm-up"
for t in "${PG_TARGETS[@]}"; do pgbench -n -S -c 16 -j 2 -t 100 -h 127.0.0.1 -p "${PORT[$t]}" -U "$PG_USER" "$DB" >/dev/null 2>&1 || true; done
for round in $(seq 1 "$ROUNDS"); do
    for scenario in "${SCENARIOS[@]}"; do
        for clients in "${CLIENTS[@]}"; do
            [ "${scenario#*-}" = tpcb ] && [ "$clients" = 1 ] && continue
            n=${#PG_TARGETS[@]}
            for i in $(seq 0 $((n - 1))); do
                t=${PG_TARGETS[$(((i + round) % n))]}
                log "round $round/$ROUNDS: $scenario, $clients clients, $t"
                # PgBouncer 1.18 cannot serve prepared statements in transaction pooling.
                [ "$t" = pgbouncer ] && [ "${scenario%%-*}" = prepared ] && continue
                run_pgbench "$t" "$scenario" "$clients"
            done
        done
    done
    if [ $MYSQL = 1 ]; then
        for test in oltp_point_select oltp_read_only; do
            n=${#MY_TARGETS[@]}
            for i in $(seq 0 $((n - 1))); do
                t=${MY_TARGETS[$(((i + round) % n))]}
                log "round $round/$ROUNDS: sysbench $test, $t"
                run_sysbench "$t" "$test"
            done
        done
    fi
done

if [ $COUNTS = 1 ]; then
    # System calls per transaction, one core, simple mode (the one PgBouncer 1.18 serves).
    for t in querypilot-1c pgbouncer; do
        [ -n "${PID[$t]:-}" ] || continue
        log "strace: $t"
        printf 'strace\t%s\t%s\n' "$t" "$(strace_count "${PID[$t]}" "${PORT[$t]}" "$DB" "$STRACE_TX" "$BASE/strace-$t.txt")" >>"$COUNTS_TSV"
    done
    # User-space instructions per transaction, each a fresh process under callgrind: the router on
    # one core and on two for the same load (#39: nothing shared on the per-statement path, so the
    # second core adds no instructions), and PgBouncer in simple and extended mode.
    mkdir -p "$BASE/cg"; chmod 777 "$BASE/cg"
    for cores in 0 "0, 1"; do
        label=querypilot-1c; [ "$cores" = 0 ] || label=querypilot-2c
        log "callgrind: $label"
        # Fair scheduling: valgrind runs one thread at a time, and with its default lock a core
        # that keeps entering its ring starves the other.
        start_qp querypilot-cg "$cores" valgrind --tool=callgrind --fair-sched=yes --instr-atstart=no \
            --callgrind-out-file="$BASE/cg/$label.out"
        for mode in simple extended prepared; do
            printf 'callgrind\t%s\t%s\t%s\n' "$label" "$mode" \
                "$(callgrind_count "${PID[querypilot-cg]}" "${PORT[querypilot-cg]}" "$DB" "$mode" "$CALLGRIND_TX" "$BASE/cg/$label.out")" >>"$COUNTS_TSV"
        done
        kill -TERM "${PID[querypilot-cg]}"; wait "${PID[querypilot-cg]}" 2>/dev/null || true
    done
    if [ -n "${PID[pgbouncer]:-}" ]; then
        log "callgrind: pgbouncer"
        port=$(free_port)
        # Without its stats log: with it, the first count of a PgBouncer under callgrind came out
        # 8x the next ones, run after run (44,483 then 5,426, 5,135, ...); without it the first is
        # like the rest (5,471, 5,646, 5,776).
        PGB_EXTRA="log_stats = 0" start_pgbouncer "$BASE/pgbouncer-cg" "$DB" "$port" "$POOL" \
            valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$BASE/cg/pgbouncer.out"
        PIDS+=("$PGB_PID")
        for mode in simple extended; do
            printf 'callgrind\tpgbouncer\t%s\t%s\n' "$mode" \
                "$(callgrind_count "$PGB_PID" "$port" "$DB" "$mode" "$CALLGRIND_TX" "$BASE/cg/pgbouncer.out")" >>"$COUNTS_TSV"
        done
        kill -TERM "$PGB_PID" 2>/dev/null || true
    fi
fi

# Idle clients held open through the one-core router while pgbench keeps querying it.
log "memory check: $IDLE idle clients"
rss0=$(rss_kib querypilot-1c)
coproc IDLERS { python3 "$ROOT/perf/idle_clients.py" 127.0.0.1 "${PORT[querypilot-1c]}" "$PG_USER" "$PG_PASSWORD" "$DB" "$IDLE" 2>&1; }
read -r _ ready <&"${IDLERS[0]}" || ready=0
sleep 2
rss1=$(rss_kib querypilot-1c)
run_pgbench querypilot-1c simple-select 1 querypilot-1c-with-idle
run_pgbench querypilot-1c simple-select 16 querypilot-1c-with-idle
exec {IDLERS[1]}>&-
wait "$IDLERS_PID" 2>/dev/null || true
printf 'idle\t%s\t%s\t%s\t%s\n' "$IDLE" "$ready" "$rss0" "$rss1" >>"$COUNTS_TSV"

python3 "$ROOT/perf/parse.py" report "$RAW" "$COUNTS_TSV" "$ROOT/perf/RESULTS.md" "$ROUNDS" "$DURATION"
