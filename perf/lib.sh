# perf/lib.sh - what the single-router perf scripts share: building the router, a private
# PostgreSQL with pgbench data (torn down on exit), a free port, starting the router and
# waiting for it, and the CPU time of a process. Sourced, not run; the caller sets ROOT and
# `set -euo pipefail`.

log() { printf '[perf] %s\n' "$*" >&2; }

# build_router: `cargo build --release` unless $1 is 0; sets BIN (under $CARGO_TARGET_DIR when
# that is set, as cargo builds it there).
build_router() {
    if [ "${1:-1}" != 0 ]; then
        log "cargo build --release"
        (cd "$ROOT" && cargo build --release --quiet)
    fi
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/querypilot"
    [ -x "$BIN" ] || { log "no $BIN: build it first"; exit 1; }
}

# start_pg_pgbench PREFIX DB SCALE: a PostgreSQL pair under a fresh /tmp/PREFIX-XXXXXX (BASE),
# database DB owned by the harness user with `pgbench -i -s SCALE` data; exports its PG_*
# variables and PGPASSWORD. An EXIT trap stops the router (ROUTER_PID) and the databases.
start_pg_pgbench() {
    BASE=$(mktemp -d "/tmp/$1-XXXXXX")
    rmdir "$BASE"
    ROUTER_PID=""
    trap perf_cleanup EXIT
    log "starting PostgreSQL under $BASE"
    eval "$("$ROOT/tests/support/dbs.sh" up "$BASE" --what pg --owner-pid $$)"
    export PGPASSWORD="$PG_PASSWORD"
    "$PG_BIN/psql" -X -q -h "$PG_HOST" -p "$PG_PRIMARY_PORT" -U "$PG_SUPERUSER" -d postgres \
        -c "CREATE DATABASE $2 OWNER $PG_USER"
    log "pgbench -i -s $3"
    pgbench -i -q -s "$3" -h "$PG_HOST" -p "$PG_PRIMARY_PORT" -U "$PG_USER" "$2" >/dev/null 2>&1
}

perf_cleanup() {
    if [ -n "${ROUTER_PID:-}" ]; then kill -TERM "$ROUTER_PID" 2>/dev/null || true; wait "$ROUTER_PID" 2>/dev/null || true; fi
    "$ROOT/tests/support/dbs.sh" down "$BASE" >/dev/null 2>&1 || true
}

# pids_then_perf_cleanup: an EXIT trap for scripts that run several proxies at once: stops the
# processes in PIDS, then what perf_cleanup stops.
pids_then_perf_cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    perf_cleanup
}

# start_mariadb_sysbench PREFIX TEST: a MariaDB primary and replica under a fresh
# /tmp/PREFIX-XXXXXX (BASE) with sysbench TEST's tables prepared on the primary; exports MY_*
# and SB_ARGS. Processes started later go in PIDS; an EXIT trap stops them and the databases.
start_mariadb_sysbench() {
    BASE=$(mktemp -d "/tmp/$1-XXXXXX")
    rmdir "$BASE"
    PIDS=()
    trap stop_pids_and_dbs EXIT
    log "starting MariaDB primary + replica under $BASE"
    eval "$("$ROOT/tests/support/dbs.sh" up "$BASE" --what mariadb --owner-pid $$)"
    SB_ARGS=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-user="$MY_USER" --mysql-password="$MY_PASSWORD"
        --mysql-db="$MY_DATABASE" --tables=4 --table-size="$TABLE_SIZE")
    log "sysbench $2 prepare"
    sysbench "$2" "${SB_ARGS[@]}" --mysql-port="$MY_PRIMARY_PORT" prepare >/dev/null
}

stop_pids_and_dbs() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    "$ROOT/tests/support/dbs.sh" down "$BASE" >/dev/null 2>&1 || true
}

# pg_split_config PORT DB MAX_CONNECTIONS READ_YOUR_WRITES: a one-core router config with a
# read/write split over the started PostgreSQL pair (transaction pooling); [routing] comes last,
# so a caller may append more of its settings.
pg_split_config() {
    local role port
    printf '[general]\ncores = [0]\n[[listeners]]\nprotocol = "postgres"\nbind = "127.0.0.1:%s"\n' "$1"
    for role in primary replica; do
        if [ $role = primary ]; then port=$PG_PRIMARY_PORT; else port=$PG_REPLICA_PORT; fi
        printf '[pools.%s]\nmode = "transaction"\nusername = "%s"\npassword = "%s"\ndatabase = "%s"\n' \
            "$role" "$PG_USER" "$PG_PASSWORD" "$2"
        printf 'max_connections = %s\nbackends = [{ host = "127.0.0.1", port = %s }]\n' "$3" "$port"
    done
    printf '[routing]\nread_write_split = true\nread_pool = "replica"\nwrite_pool = "primary"\n'
    printf 'read_your_writes = "%s"\n' "$4"
}

# bench_config PORT CORES AUTH MAX_CONNECTIONS [POOL_LINES]: a router on cores CORES ("0" or
# "0, 1") in front of the started primary: one postgres listener on PORT logging clients in with
# AUTH (scram-sha-256 or md5), pool `bench` in transaction mode with MAX_CONNECTIONS connections
# and POOL_LINES added to its section; [routing] comes last, so a caller may append more sections.
bench_config() {
    cat <<CONF
[general]
cores = [$2]
[[listeners]]
protocol = "postgres"
bind = "127.0.0.1:$1"
auth_method = "$3"
[pools.bench]
mode = "transaction"
username = "$PG_USER"
password = "$PG_PASSWORD"
database = "bench"
max_connections = $4
acquire_timeout = "30s"
backends = [{ host = "127.0.0.1", port = $PG_PRIMARY_PORT }]
${5:-}
[routing]
default_pool = "bench"
CONF
}

# my_bench_config PORT MAX_CONNECTIONS [GENERAL_LINES]: a router on core 0 in front of the
# started MariaDB primary: GENERAL_LINES added to [general], one mysql listener on PORT, pool
# `my_primary` in transaction mode with MAX_CONNECTIONS connections, the MySQL default pool.
my_bench_config() {
    cat <<CONF
[general]
cores = [0]
${3:-}
[[listeners]]
protocol = "mysql"
bind = "127.0.0.1:$1"
[pools.my_primary]
mode = "transaction"
username = "$MY_USER"
password = "$MY_PASSWORD"
database = "$MY_DATABASE"
max_connections = $2
backends = [{ host = "127.0.0.1", port = $MY_PRIMARY_PORT }]
[routing]
mysql_default_pool = "my_primary"
CONF
}

# abuse_config PORT: the router #33's abuse scripts measure: one core, pool `bench` on the
# primary in transaction mode, a 64 MiB client buffer budget.
abuse_config() {
    bench_config "$1" 0 scram-sha-256 16
    printf '[limits]\nclient_buffer_budget = "64MiB"\n'
}

# p99 PORT: p99 latency in ms of pgbench -S -M $P99_MODE (default prepared; CLIENTS clients, SECS seconds) against
# database bench through PORT, from its per-transaction log.
p99() {
    rm -f "$BASE"/pgb.*
    pgbench -n -S -M "${P99_MODE:-prepared}" -c "$CLIENTS" -j 2 -T "$SECS" -l --log-prefix="$BASE/pgb" \
        -h 127.0.0.1 -p "$1" -U "$PG_USER" bench >/dev/null 2>&1 || log "pgbench failed"
    cat "$BASE"/pgb.* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int(NR*0.99)]/1000}'
}

# ratio_table FIGURES NAME_WIDTH: for lines "target kind p99" in FIGURES, each (target, kind)'s
# median [min-max] and the median's ratio to the same target's "none" median.
ratio_table() {
    python3 - "$1" "$2" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, kind, p99 = line.split()
    runs.setdefault((name, kind), []).append(float(p99))
w = int(sys.argv[2])
for (name, kind), v in runs.items():
    base = statistics.median(runs[(name, "none")])
    m = statistics.median(v)
    print(f"{name:{w}} {kind:8} {m:7.2f} [{min(v):.2f}-{max(v):.2f}]  x{m / base:.2f}")
PY
}

# md5_pool_config PORT CORES DB POOL: the router perf/rt-side-by-side.sh measures beside PgBouncer:
# CORES (e.g. `0` or `0, 1`), md5 client logins (the same client authentication as PgBouncer's
# there: a SCRAM login costs more than a thousand transactions' relaying, which would bill the
# proxies unequally), one pool DB of POOL server connections in transaction mode on the started
# primary.
md5_pool_config() {
    cat <<EOF
[general]
cores = [$2]
log_level = "warn"
[[listeners]]
protocol = "postgres"
bind = "127.0.0.1:$1"
auth_method = "md5"
[pools.$3]
mode = "transaction"
username = "$PG_USER"
password = "$PG_PASSWORD"
database = "$3"
max_connections = $4
backends = [{ host = "$PG_HOST", port = $PG_PRIMARY_PORT }]
[routing]
default_pool = "$3"
EOF
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_router CONF PORT [LAUNCHER...]: runs $BIN -c CONF (under LAUNCHER, e.g. valgrind, when
# given) with its log in $BASE/router.log, sets ROUTER_PID and waits until PORT answers.
start_router() {
    local conf=$1 port=$2
    shift 2
    "$@" "$BIN" -c "$conf" >"$BASE/router.log" 2>&1 &
    ROUTER_PID=$!
    wait_pg_port "$port" "see $BASE/router.log"
}

# start_base_router PORT: when QP_BASE names a router binary (a build before a change), runs it
# beside the one under test on a port of its own, with $BASE/querypilot.toml's listener moved
# there; sets BASE_PORT and BASE_PID and waits until it answers. Without QP_BASE does nothing.
start_base_router() {
    [ -n "${QP_BASE:-}" ] || return 0
    BASE_PORT=$(free_port)
    sed "s/127.0.0.1:$1/127.0.0.1:$BASE_PORT/" "$BASE/querypilot.toml" >"$BASE/base.toml"
    "$QP_BASE" -c "$BASE/base.toml" >"$BASE/base.log" 2>&1 &
    BASE_PID=$!
    wait_pg_port "$BASE_PORT" "see $BASE/base.log"
}

# cpu_ticks PID: utime + stime (fields 14 and 15 of /proc/PID/stat, in clock ticks).
cpu_ticks() {
    local s f
    s=$(cat "/proc/$1/stat")
    s=${s##*) }
    read -r -a f <<<"$s"
    echo $((f[11] + f[12]))
}

# host_busy_ticks: clock ticks every CPU of the host spent working since boot (user, nice,
# system, irq and softirq of /proc/stat's `cpu` line; idle, iowait and a hypervisor's steal left
# out), so load generator, database and proxy together.
host_busy_ticks() {
    awk '/^cpu /{print $2 + $3 + $4 + $7 + $8; exit}' /proc/stat
}

# strace_count PID PORT DB TX OUT [CLIENTS]: system calls per transaction of process PID while
# `pgbench -S -M simple -c CLIENTS` (default 16) runs TX transactions per client through PORT;
# prints "calls/tx<TAB>the calls by name". OUT is strace's summary file.
strace_count() {
    local pid=$1 port=$2 db=$3 tx=$4 out=$5 clients=${6:-16} st
    strace -f -c -o "$out" -p "$pid" 2>/dev/null &
    st=$!
    sleep 1
    pgbench -n -S -M simple -c "$clients" -j $((clients < 2 ? 1 : 2)) -t "$tx" -h 127.0.0.1 -p "$port" -U "$PG_USER" "$db" >/dev/null 2>&1 ||
        log "pgbench under strace (port $port) failed"
    kill -INT "$st"
    wait "$st" 2>/dev/null || true
    python3 - "$out" "$((tx * clients))" <<'PY'
import sys
calls = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        calls[f[-1]] = int(f[3])
tx = int(sys.argv[2])
detail = ", ".join(f"{k} {v / tx:.2f}" for k, v in sorted(calls.items(), key=lambda kv: -kv[1]) if v / tx >= 0.01)
print(f"{sum(calls.values()) / tx:.2f}\t{detail}")
PY
}

# callgrind_total PID OUTPREFIX COMMAND...: user-space instructions process PID executes while
# COMMAND runs, PID running under `valgrind --tool=callgrind --instr-atstart=no
# --callgrind-out-file=OUTPREFIX`.
callgrind_total() {
    local pid=$1 out=$2
    shift 2
    # callgrind_control reaches the process through vgdb's pipes, which carry the name of the
    # user it runs as: a process of another user (PgBouncer runs as postgres) is controlled as it.
    local ctl=(callgrind_control)
    [ "$(stat -c %U "/proc/$pid")" = "$(id -un)" ] ||
        ctl=(setpriv --reuid="$(stat -c %U "/proc/$pid")" --regid="$(stat -c %G "/proc/$pid")" --init-groups callgrind_control)
    rm -f "$out"*
    "${ctl[@]}" -i on "$pid" >/dev/null 2>&1 || log "callgrind_control cannot reach pid $pid"
    "$@" >/dev/null 2>&1 || log "under callgrind: $* failed"
    "${ctl[@]}" -i off "$pid" >/dev/null 2>&1 || true
    "${ctl[@]}" -d "$pid" >/dev/null 2>&1 || true
    sleep 1
    # A dump taken after instrumentation was switched off heads its file with `summary: 0`;
    # `totals:` at its end holds the instructions counted.
    cat "$out"* 2>/dev/null | sed -n 's/^totals: \([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}'
}

# callgrind_count PID PORT DB MODE TX OUTPREFIX [WORKLOAD...]: instructions per transaction of
# PID (see callgrind_total) while `pgbench WORKLOAD -M MODE -c 16` (WORKLOAD: -S unless given)
# runs TX transactions per client through PORT, after 20 uncounted ones, so logins and
# first-use work stay out.
callgrind_count() {
    local pid=$1 port=$2 db=$3 mode=$4 tx=$5 out=$6 ir
    shift 6
    local bench=(pgbench -n "${@:--S}" -M "$mode" -c 16 -j 2 -h 127.0.0.1 -p "$port" -U "$PG_USER" "$db")
    "${bench[@]}" -t 20 >/dev/null 2>&1
    ir=$(callgrind_total "$pid" "$out" "${bench[@]}" -t "$tx")
    echo $((ir / (tx * 16)))
}

# wait_catalogs: waits until the router logging to $BASE/router.log (started with
# QUERYPILOT_LOG naming `querypilot::session::context::udf=info`) reports its function catalogs
# loaded (2 minutes at most): a load inside a counted run puts whole parses into the count.
wait_catalogs() {
    for _ in $(seq 1200); do
        grep -q 'function volatility' "$BASE/router.log" && return
        sleep 0.1
    done
    log "the router never reported loading its function catalogs; see $BASE/router.log"
    exit 1
}

# wait_pg_port PORT [HINT]: waits until a PostgreSQL listener answers on PORT (60 s at most);
# exits with HINT in the message otherwise.
wait_pg_port() {
    for _ in $(seq 600); do
        "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$1" && return
        sleep 0.1
    done
    log "nothing answers on port $1${2:+: $2}"
    exit 1
}

# start_pgbouncer DIR DB PORT POOL [LAUNCHER...]: PgBouncer on PORT (transaction pooling, POOL
# server connections, md5 logins of $PG_USER) in front of database DB, its files under DIR, run
# under LAUNCHER (e.g. valgrind) when given; as the postgres user when run as root, since
# PgBouncer refuses root. $PGB_EXTRA, when set, is appended to its [pgbouncer] section (e.g.
# TLS settings). Sets PGB_PID and waits until PORT answers.
start_pgbouncer() {
    local dir=$1 db=$2 port=$3 pool=$4
    shift 4
    mkdir -p "$dir"
    cat >"$dir/pgbouncer.ini" <<INI
[databases]
$db = host=$PG_HOST port=$PG_PRIMARY_PORT dbname=$db
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
auth_type = md5
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = $pool
max_client_conn = 1000
unix_socket_dir =
logfile = $dir/pgbouncer.log
${PGB_EXTRA:-}
INI
    printf '"%s" "%s"\n' "$PG_USER" "$PG_PASSWORD" >"$dir/userlist.txt"
    if [ "$(id -u)" = 0 ]; then
        chmod o+x "$(dirname "$dir")"
        touch "$dir/pgbouncer.log"
        chown -R postgres: "$dir"
        setpriv --reuid=postgres --regid=postgres --init-groups "$@" pgbouncer "$dir/pgbouncer.ini" >/dev/null 2>&1 &
    else
        "$@" pgbouncer "$dir/pgbouncer.ini" >/dev/null 2>&1 &
    fi
    PGB_PID=$!
    wait_pg_port "$port"
}

# build_example NAME: `cargo build --release --example NAME` unless $2 is 0; sets EXAMPLE_BIN
# (under $CARGO_TARGET_DIR when that is set, as cargo builds it there).
build_example() {
    if [ "${2:-1}" != 0 ]; then
        log "cargo build --release --example $1"
        (cd "$ROOT" && cargo build --release --locked --quiet --example "$1")
    fi
    EXAMPLE_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/$1"
    [ -x "$EXAMPLE_BIN" ] || { log "no $EXAMPLE_BIN: build it first"; exit 1; }
}

# start_haproxy_tcp DIR PORT SERVER [LAUNCHER...]: HAProxy in TCP mode on one thread (the field's
# byte copier on epoll, nothing parsed) on PORT, forwarding each client to its own connection to
# SERVER (HOST:PORT); its files under DIR, run under LAUNCHER (e.g. taskset) when given. Sets
# HAPROXY_PID; does not wait for it (the caller knows what answers on PORT).
start_haproxy_tcp() {
    local dir=$1 port=$2 server=$3
    shift 3
    mkdir -p "$dir"
    cat >"$dir/haproxy.cfg" <<CFG
global
    nbthread 1
    maxconn 4000
defaults
    mode tcp
    timeout connect 5s
    timeout client 1h
    timeout server 1h
listen forward
    bind 127.0.0.1:$port
    server backend $server
CFG
    "$@" haproxy -db -f "$dir/haproxy.cfg" >"$dir/haproxy.log" 2>&1 &
    HAPROXY_PID=$!
}
