#!/usr/bin/env bash
# perf/run.sh - side-by-side load harness: direct server vs PgBouncer vs QueryPilot.
#
#   perf/run.sh [--quick] [--rounds N] [--duration S] [--cores N] [--no-mysql] [--no-pgbouncer]
#
# Starts its own PostgreSQL and MariaDB (tests/support/dbs.sh), initializes pgbench and sysbench
# data, builds QueryPilot (release), starts it in transaction mode and, when installed, PgBouncer
# with an equivalent config (pool of 10 server connections), then runs interleaved rounds
# (A/B/C, rotating the order each round) of pgbench -S in simple/extended/prepared mode and the
# TPC-B script at 1, 16 and 128 clients, and sysbench oltp_point_select / oltp_read_only direct vs
# QueryPilot. For every configuration it reports the median TPS, p50/p99 latency, the proxy's CPU
# time per transaction (utime+stime from /proc/PID/stat) and its RSS, then a memory check with
# idle clients and a 1-core vs N-core scaling line, and writes everything into perf/RESULTS.md
# between the run.sh markers. --quick: one round, 3 s runs, fewer configurations (~2 minutes).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
QUICK=0; ROUNDS=3; DURATION=10; CORES=$(nproc); MYSQL=1; BOUNCER=1
while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=1; ROUNDS=1; DURATION=3; shift ;;
        --rounds) ROUNDS=${2:?}; shift 2 ;;
        --duration) DURATION=${2:?}; shift 2 ;;
        --cores) CORES=${2:?}; shift 2 ;;
        --no-mysql) MYSQL=0; shift ;;
        --no-pgbouncer) BOUNCER=0; shift ;;
        *) sed -n '2,14p' "$0" >&2; exit 2 ;;
    esac
done
command -v pgbouncer >/dev/null || BOUNCER=0
log() { printf '[perf +%ss] %s\n' "$SECONDS" "$*" >&2; }

bash "$ROOT/.ci/deps.sh"
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
log "building querypilot (release)"
(cd "$ROOT" && cargo build --release --quiet)
QP_BIN="$ROOT/target/release/querypilot"

BASE=/tmp/qp-perf-run
WORK=$(mktemp -d /tmp/qp-perf-work.XXXX)
chmod 755 "$WORK"
bash "$ROOT/tests/support/dbs.sh" down "$BASE" >/dev/null 2>&1 || true
what=all; [ $MYSQL = 1 ] || what=pg
eval "$(bash "$ROOT/tests/support/dbs.sh" up "$BASE" --what $what --owner-pid $$)"
QP_PID=""; PGB_PID=""
cleanup() {
    [ -n "$QP_PID" ] && kill -TERM "$QP_PID" 2>/dev/null && wait "$QP_PID" 2>/dev/null || true
    [ -n "$PGB_PID" ] && kill -TERM "$PGB_PID" 2>/dev/null || true
    bash "$ROOT/tests/support/dbs.sh" down "$BASE" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
QP_PORT=$(free_port); QP_MD5_PORT=$(free_port); QP_MY_PORT=$(free_port); PGB_PORT=$(free_port)
export PGPASSWORD=$PG_PASSWORD
SCALE=10; [ $QUICK = 1 ] && SCALE=2
log "pgbench -i -s $SCALE"
pgbench -q -i -s $SCALE -h 127.0.0.1 -p "$PG_PRIMARY_PORT" -U "$PG_USER" "$PG_DATABASE" >/dev/null 2>&1
SB_ARGS=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-user="$MY_USER" --mysql-password="$MY_PASSWORD" --mysql-db="$MY_DATABASE" --tables=4 --table-size=10000)
if [ $MYSQL = 1 ]; then
    log "sysbench prepare"
    sysbench oltp_read_only "${SB_ARGS[@]}" --mysql-port="$MY_PRIMARY_PORT" prepare >/dev/null
fi

start_qp() { # $1 = cores list
    cat > "$WORK/qp.toml" <<TOML
[general]
pool_mode = "transaction"
cores = [$1]
shutdown_drain = "1s"
log_level = "warn"
[[listeners]]
protocol = "postgres"
bind = "127.0.0.1:$QP_PORT"
[[listeners]]
name = "pg-md5"
protocol = "postgres"
bind = "127.0.0.1:$QP_MD5_PORT"
auth_method = "md5"
[[listeners]]
protocol = "mysql"
bind = "127.0.0.1:$QP_MY_PORT"
[pools.pg_primary]
username = "$PG_USER"
password = "$PG_PASSWORD"
database = "$PG_DATABASE"
max_connections = 10
backends = [{ host = "127.0.0.1", port = $PG_PRIMARY_PORT }]
[pools.my_primary]
username = "$MY_USER"
password = "$MY_PASSWORD"
database = "$MY_DATABASE"
max_connections = 10
backends = [{ host = "127.0.0.1", port = ${MY_PRIMARY_PORT:-3306} }]
[routing]
# Pool names differ from the database names on purpose: a client's database name selects the
# pool of that name first, so a MySQL client asking for database "app" must not land on a
# PostgreSQL pool called "app".
default_pool = "pg_primary"
mysql_default_pool = "my_primary"
TOML
    ulimit -n 65536 2>/dev/null || true
    "$QP_BIN" -c "$WORK/qp.toml" 2>"$WORK/qp.log" &
    QP_PID=$!
    for _ in $(seq 1 100); do
        psql -X -q -h 127.0.0.1 -p "$QP_PORT" -U "$PG_USER" "$PG_DATABASE" -c 'SELECT 1' >/dev/null 2>&1 && return
        sleep 0.1
    done
    cat "$WORK/qp.log" >&2; exit 1
}
stop_qp() { kill -TERM "$QP_PID"; wait "$QP_PID" 2>/dev/null || true; QP_PID=""; }

start_pgbouncer() {
    mkdir -p "$WORK/pgb"; chown postgres: "$WORK/pgb" 2>/dev/null || true
    cat > "$WORK/pgb/pgbouncer.ini" <<INI
[databases]
$PG_DATABASE = host=127.0.0.1 port=$PG_PRIMARY_PORT dbname=$PG_DATABASE user=$PG_USER password=$PG_PASSWORD
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PGB_PORT
unix_socket_dir =
auth_type = trust
auth_file = $WORK/pgb/userlist.txt
pool_mode = transaction
default_pool_size = 10
max_client_conn = 2000
logfile = $WORK/pgb/pgbouncer.log
pidfile = $WORK/pgb/pgbouncer.pid
INI
    printf '"%s" "%s"\n' "$PG_USER" "$PG_PASSWORD" > "$WORK/pgb/userlist.txt"
    chown -R postgres: "$WORK/pgb" 2>/dev/null || true
    if [ "$(id -u)" = 0 ]; then
        setpriv --reuid=postgres --regid=postgres --init-groups pgbouncer -q "$WORK/pgb/pgbouncer.ini" &
    else
        pgbouncer -q "$WORK/pgb/pgbouncer.ini" &
    fi
    PGB_PID=$!
    for _ in $(seq 1 100); do
        psql -X -q -h 127.0.0.1 -p "$PGB_PORT" -U "$PG_USER" "$PG_DATABASE" -c 'SELECT 1' >/dev/null 2>&1 && return
        sleep 0.1
    done
    log "pgbouncer did not start; continuing without it"; BOUNCER=0
}

cpu_ticks() { [ -n "${1:-}" ] && awk '{print $14+$15}' "/proc/$1/stat" || echo 0; }
rss_kib() { [ -n "${1:-}" ] && awk '/VmRSS/{print $2}' "/proc/$1/status" || echo 0; }
RAW="$WORK/raw.tsv"; : > "$RAW"

# One pgbench run; appends: target scenario clients tps p50_ms p99_ms cpu_us_per_tx rss_kib
run_pgbench() { # target port pid scenario clients
    local target=$1 port=$2 pid=$3 scenario=$4 clients=$5 mode=${4%%-*} script=${4#*-}
    local args=(-h 127.0.0.1 -p "$port" -U "$PG_USER" -M "$mode" -c "$clients" -j $(( clients < 2 ? 1 : 2 )) -T "$DURATION" -l --sampling-rate=0.2 --log-prefix="$WORK/lat")
    [ "$script" = select ] && args+=(-S)
    rm -f "$WORK"/lat.*
    local t0; t0=$(cpu_ticks "$pid")
    local out; out=$(cd "$WORK" && pgbench "${args[@]}" "$PG_DATABASE" 2>&1) || { log "pgbench failed: $target $scenario $clients"; echo "$out" | tail -3 >&2; return; }
    local t1; t1=$(cpu_ticks "$pid")
    python3 "$ROOT/perf/parse.py" pgbench "$target" "$scenario" "$clients" "$t0" "$t1" "$(rss_kib "$pid")" "$WORK" >>"$RAW" <<<"$out"
}

run_sysbench() { # target port pid test
    local target=$1 port=$2 pid=$3 test=$4
    local t0; t0=$(cpu_ticks "$pid")
    local out; out=$(sysbench "$test" "${SB_ARGS[@]}" --mysql-port="$port" --threads=16 --time="$DURATION" --db-ps-mode=auto run 2>&1) || { log "sysbench failed: $target $test"; echo "$out" | tail -5 >&2; return; }
    local t1; t1=$(cpu_ticks "$pid")
    python3 "$ROOT/perf/parse.py" sysbench "$target" "$test" "$t0" "$t1" "$(rss_kib "$pid")" >>"$RAW" <<<"$out"
}

ALL_CPUS=$(seq -s, 0 $((CORES - 1)))
start_qp "$ALL_CPUS"
[ $BOUNCER = 1 ] && start_pgbouncer
SCENARIOS=(simple-select extended-select prepared-select prepared-tpcb simple-tpcb)
CLIENTS=(1 16 128)
if [ $QUICK = 1 ]; then SCENARIOS=(simple-select prepared-select prepared-tpcb); CLIENTS=(1 16); fi
TARGETS=(direct querypilot); [ $BOUNCER = 1 ] && TARGETS=(direct pgbouncer querypilot)
for round in $(seq 1 "$ROUNDS"); do
    log "round $round/$ROUNDS"
    for scenario in "${SCENARIOS[@]}"; do
        for clients in "${CLIENTS[@]}"; do
            n=${#TARGETS[@]}
            for i in $(seq 0 $((n - 1))); do
                t=${TARGETS[$(( (i + round) % n ))]}
                case $t in
                    direct) run_pgbench direct "$PG_PRIMARY_PORT" "" "$scenario" "$clients" ;;
                    pgbouncer) run_pgbench pgbouncer "$PGB_PORT" "$PGB_PID" "$scenario" "$clients" ;;
                    querypilot) run_pgbench querypilot "$QP_PORT" "$QP_PID" "$scenario" "$clients" ;;
                esac
            done
        done
    done
    if [ $MYSQL = 1 ]; then
        for test in oltp_point_select oltp_read_only; do
            if (( round % 2 )); then
                run_sysbench direct "$MY_PRIMARY_PORT" "" $test; run_sysbench querypilot "$QP_MY_PORT" "$QP_PID" $test
            else
                run_sysbench querypilot "$QP_MY_PORT" "$QP_PID" $test; run_sysbench direct "$MY_PRIMARY_PORT" "" $test
            fi
        done
    fi
done

# Memory: idle clients held open through QueryPilot while pgbench keeps querying.
IDLE=10000; [ $QUICK = 1 ] && IDLE=1000
log "memory check: $IDLE idle clients"
rss0=$(rss_kib "$QP_PID")
coproc IDLERS { python3 "$ROOT/perf/idle_clients.py" 127.0.0.1 "$QP_MD5_PORT" "$PG_USER" "$PG_PASSWORD" "$PG_DATABASE" "$IDLE" 2>&1; }
read -r ready _ <&"${IDLERS[0]}" || true
rss1=$(rss_kib "$QP_PID")
run_pgbench querypilot-with-idle "$QP_PORT" "$QP_PID" prepared-select 16
exec {IDLERS[1]}>&-; wait "$IDLERS_PID" 2>/dev/null || true
MEM_LINE="$IDLE idle clients ($ready): router RSS $rss0 KiB -> $rss1 KiB, $(( (rss1 - rss0) * 1024 / IDLE )) bytes per idle client"

# Scaling: 1 core vs all cores, same workload.
stop_qp
start_qp 0
run_pgbench querypilot-1core "$QP_PORT" "$QP_PID" prepared-select 16
stop_qp

python3 "$ROOT/perf/parse.py" report "$RAW" "$ROOT/perf/RESULTS.md" "$MEM_LINE" "$CORES" "$ROUNDS" "$DURATION"
