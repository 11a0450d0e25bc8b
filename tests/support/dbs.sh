#!/usr/bin/env bash
# dbs.sh - QueryPilot's one implementation of throw-away database server lifecycle:
# a PostgreSQL primary + streaming hot standby and a MariaDB primary + replica on
# 127.0.0.1, everything under one base directory. Used by the Rust test harness
# (tests/support/mod.rs), perf scripts and demos.
#
#   dbs.sh up BASE_DIR [--port-base N] [--what pg|mariadb|all] [--owner-pid PID]
#       Start the servers, verify replication, write BASE_DIR/env.sh and print ONE line
#       of KEY=VALUE pairs on stdout (progress goes to stderr). Ports are
#       N+0 PG primary, N+1 PG replica, N+2 MariaDB primary, N+3 MariaDB replica; without
#       --port-base a free, reserved block of 4 loopback ports is picked. With
#       --owner-pid a detached watchdog runs `dbs.sh down BASE_DIR` once PID is gone.
#   dbs.sh down BASE_DIR
#       Stop exactly these servers (replicas first) and delete BASE_DIR (only if it holds
#       the marker file written by `up`).
#   dbs.sh stop|start|kill BASE_DIR pg-primary|pg-replica|my-primary|my-replica
#       kill = SIGKILL of the server process (a crash: no shutdown, recovery at the next
#       start); returns once it and, for PostgreSQL, its backends are gone.
#   dbs.sh add-pg-standby BASE_DIR PORT
#       A second PostgreSQL hot standby of the primary on PORT (data in pg/replica2), for the
#       tests that balance reads over two replicas (#22); `down` stops it with the rest.
#   dbs.sh add-pg-tls BASE_DIR PORT
#       A PostgreSQL server on PORT (data in pg/tls) that accepts TLS connections only
#       (`ssl = on`, hostssl rules, `hostnossl ... reject`), with the certificates of
#       tls-certs (below); roles postgres (trust), app/app (scram), app_cert (which logs in
#       by certificate), database app. For the backend TLS tests (#38); `down` stops it with
#       the rest. Its port is written to pg/tls.port; when it runs already, nothing is done.
#   dbs.sh add-my-tls BASE_DIR PORT
#       A standalone MariaDB server on PORT (data in mariadb/tls) that accepts TLS
#       connections only over TCP (`require_secure_transport = ON`), with the certificates of
#       tls-certs; users root (no password), app/app (all privileges), app_x509/app
#       (`REQUIRE X509`: a client certificate issued by ca.crt), database app. For the
#       backend TLS tests (#38); `down` stops it with the rest. Its port is written to
#       mariadb/tls.port; when it runs already, nothing is done.
#   Certificates of the TLS servers, made once per BASE_DIR by the openssl CLI in
#       tls-certs: ca.crt (the servers' issuer), other-ca.crt (an unrelated CA), server.crt
#       for localhost and 127.0.0.1, client.crt/client.key (CN app_cert, issued by ca.crt),
#       expired/expired.crt + .key (issued by ca.crt for localhost/127.0.0.1, CN app_cert, for
#       server and client use, expired since 2021).
#   dbs.sh pause-replication|resume-replication BASE_DIR pg|mariadb
#       Fault injection. PG pause = pg_wal_replay_pause() on the standby (WAL is still
#       received, nothing is applied); MariaDB pause = STOP SLAVE SQL_THREAD on the replica.
#   dbs.sh promote BASE_DIR pg|mariadb
#       Failover (#40): makes the replica the primary, as an operator would once the primary
#       is gone. PG: `pg_ctl promote -w` (returns once the standby accepts writes); MariaDB:
#       STOP SLAVE IO_THREAD, wait until the relay log is applied, then `STOP SLAVE; RESET
#       SLAVE ALL; SET GLOBAL read_only = 0`.
#
# Environment: PG_BIN (default /usr/lib/postgresql/15/bin, else the newest installed
# major), DBS_TIMEOUT (readiness limit in seconds, default 60), DBS_RUN_AS (server user
# when run as root, default postgres, else nobody).
#
# Why the servers run as another user when we are root: initdb/postgres refuse root and
# mariadbd needs --user; one unprivileged user owns all four servers and their files.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HOST=127.0.0.1
MARKER=.qp-dbs
TIMEOUT=${DBS_TIMEOUT:-60}
T0=$(date +%s%N)

log() { printf '[dbs %s +%sms] %s\n' "${CMD:-}" "$(( ($(date +%s%N) - T0) / 1000000 ))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$SELF" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

# ---------------------------------------------------------------- common helpers

# alive PID: the process exists and is not a zombie. Servers are orphans re-parented to
# PID 1, which may reap slowly, so `kill -0` alone would report dead servers as alive.
alive() {
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }
    case ${s%% *} in Z|X|'') return 1 ;; esac
}

# start_time PID: kernel start time of PID (field 22 of /proc/PID/stat); with the pid it
# identifies a process even after the pid number is reused.
start_time() {
    local s f
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }
    read -r -a f <<<"$s"
    echo "${f[19]}"
}

wait_until() {   # wait_until SECONDS WHAT CMD... : poll CMD every 50 ms (never a fixed sleep)
    local end=$(( $(date +%s) + $1 )) what=$2
    shift 2
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$end" ] || { log "timeout waiting for $what"; return 1; }
        sleep 0.05
    done
}

port_busy() {    # listening socket on the port, or something answering a connect
    if command -v ss >/dev/null 2>&1; then
        [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ] && return 0
    fi
    (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

detect_pg_bin() {
    if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
    if [ -x /usr/lib/postgresql/15/bin/postgres ]; then echo /usr/lib/postgresql/15/bin; return; fi
    local newest
    newest=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$newest" ] || die "no PostgreSQL server found under /usr/lib/postgresql (set PG_BIN)"
    echo "$newest"
}

# Who runs the servers. Tools get HOME=BASE and cwd BASE so a caller's ~/.pgpass,
# ~/.psqlrc or ~/.my.cnf never leaks in and the cwd is always readable.
setup_user() {
    if [ "$(id -u)" = 0 ]; then
        RUN_AS=${DBS_RUN_AS:-$(id -u postgres >/dev/null 2>&1 && echo postgres || echo nobody)}
        [ "$(id -u "$RUN_AS" 2>/dev/null || echo 0)" != 0 ] || die "server user '$RUN_AS' missing or root"
        RUN_GROUP=$(id -gn "$RUN_AS")
    else
        RUN_AS=$(id -un)
        RUN_GROUP=$(id -gn)
    fi
}
as_user() {
    if [ "$(id -u)" = 0 ]; then
        (cd "$BASE" && exec setpriv --reuid="$RUN_AS" --regid="$RUN_GROUP" --init-groups env HOME="$BASE" "$@")
    else
        (cd "$BASE" && exec env HOME="$BASE" "$@")
    fi
}

load_state() {   # load_state BASE : variables written by `up`
    BASE=${1%/}
    [ -f "$BASE/$MARKER" ] || die "$BASE was not created by dbs.sh up (no $MARKER)"
    # shellcheck disable=SC1091
    . "$BASE/state.sh"
    PG_DIR=$BASE/pg
    MY_DIR=$BASE/mariadb
}

started() { [ "$WHAT" = all ] || [ "$WHAT" = "$1" ]; }   # started pg|mariadb

# ---------------------------------------------------------------- PostgreSQL

pg_sql() {       # pg_sql PORT [DB] : superuser psql over TCP, stdin = SQL, unaligned output
    "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$HOST" -p "$1" -U postgres -d "${2:-postgres}"
}

# Settings for a disposable, fast server; the standby copies this file. fsync=off makes
# commits cheap already; synchronous_commit stays on so a commit's WAL is flushed, hence
# streamed, at once (with it off the walsender waits up to wal_writer_delay = 200 ms).
pg_conf() {
    cat <<EOF

# ---- dbs.sh ----
listen_addresses = '$HOST'
port = $PG_PRIMARY_PORT
unix_socket_directories = '$PG_DIR'
max_connections = 600
max_prepared_transactions = 20
shared_buffers = 32MB
fsync = off
full_page_writes = off
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
hot_standby = on
hot_standby_feedback = on
wal_receiver_status_interval = 1s
deadlock_timeout = 100ms
password_encryption = 'scram-sha-256'
log_min_messages = warning
log_line_prefix = '%m [%p] %q%u@%d '
EOF
}

pg_hba() {       # one role per auth method; first match wins, so md5/password precede scram
    cat <<'EOF'
local   all          all                         trust
host    replication  all         127.0.0.1/32    trust
host    all          postgres    127.0.0.1/32    trust
host    all          app_md5     127.0.0.1/32    md5
host    all          app_plain   127.0.0.1/32    password
host    all          all         127.0.0.1/32    scram-sha-256
EOF
}

pg_start() {     # pg_start primary|replica : pg_ctl -w returns once connections are accepted
    log "pg: start $1"
    as_user "$PG_BIN/pg_ctl" -D "$PG_DIR/$1" -l "$PG_DIR/$1.log" -w -t "$TIMEOUT" start >/dev/null ||
        { tail -n 20 "$PG_DIR/$1.log" >&2 || true; return 1; }
}

pg_up() {
    as_user mkdir -p "$PG_DIR"
    log "pg: initdb ($PG_BIN)"
    as_user "$PG_BIN/initdb" -D "$PG_DIR/primary" -U postgres -A trust -E UTF8 --locale=C -N \
        --no-instructions >/dev/null
    pg_conf | as_user tee -a "$PG_DIR/primary/postgresql.conf" >/dev/null
    pg_hba | as_user tee "$PG_DIR/primary/pg_hba.conf" >/dev/null
    pg_start primary
    pg_sql "$PG_PRIMARY_PORT" <<'SQL'
CREATE ROLE app LOGIN PASSWORD 'app';
SET password_encryption = 'md5';
CREATE ROLE app_md5 LOGIN PASSWORD 'app_md5';
RESET password_encryption;
CREATE ROLE app_plain LOGIN PASSWORD 'app_plain';
GRANT pg_monitor TO app, app_md5, app_plain;
CREATE DATABASE app OWNER app;
SQL
    pg_sql "$PG_PRIMARY_PORT" app <<<'GRANT ALL ON SCHEMA public TO app_md5, app_plain;'
    log "pg: base backup"
    # -R: standby.signal + primary_conninfo; -C -S: a slot keeps WAL while the standby is
    # down or paused; -c fast: no spread checkpoint; --no-sync: the copy is disposable.
    as_user "$PG_BIN/pg_basebackup" -D "$PG_DIR/replica" -R -X stream -c fast -C -S qp_replica \
        --no-sync -d "host=$HOST port=$PG_PRIMARY_PORT user=postgres application_name=qp_replica"
    echo "port = $PG_REPLICA_PORT" | as_user tee -a "$PG_DIR/replica/postgresql.auto.conf" >/dev/null
    pg_start replica
    local lsn
    # The flush position, not the insert position: the latter may point past the header of
    # a page no record has reached yet, which the standby's replay position never passes.
    lsn=$(pg_sql "$PG_PRIMARY_PORT" <<<'SELECT pg_current_wal_flush_lsn()')
    wait_until "$TIMEOUT" "pg standby to replay $lsn" pg_replayed "$lsn"
    [ "$(pg_sql "$PG_REPLICA_PORT" <<<'SELECT pg_is_in_recovery()')" = t ] || die "pg standby not in recovery"
    wait_until "$TIMEOUT" "pg streaming replication" pg_streaming
    log "pg: streaming, standby replayed $lsn"
}
pg_replayed()  { [ "$(pg_sql "$PG_REPLICA_PORT" <<<"SELECT pg_last_wal_replay_lsn() >= '$1'::pg_lsn")" = t ]; }
pg_streaming() {
    [ "$(pg_sql "$PG_PRIMARY_PORT" <<<"SELECT count(*) FROM pg_stat_replication
        WHERE application_name = 'qp_replica' AND state = 'streaming'")" = 1 ]
}

# ---------------------------------------------------------------- MariaDB

my_sql() {       # my_sql primary|replica [OPTS] : root over the unix socket, batch mode
    local name=$1
    shift
    mariadb --no-defaults -S "$MY_DIR/$name.sock" -u root -N -B "$@"
}

my_cnf_small() {  # the character set and the small, unsynced InnoDB every test server runs with
    cat <<EOF
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
innodb-buffer-pool-size=32M
innodb-log-file-size=8M
innodb-flush-log-at-trx-commit=0
innodb-doublewrite=0
innodb-buffer-pool-dump-at-shutdown=OFF
innodb-buffer-pool-load-at-startup=OFF
EOF
}

my_cnf() {       # my_cnf NAME SERVER_ID PORT READ_ONLY
    local ed=""
    # The ed25519 plugin must be loaded on both servers: CREATE USER ... VIA ed25519 replicates.
    [ -f "$(mariadbd --no-defaults --verbose --help 2>/dev/null | awk '$1 == "plugin-dir" {print $2}')/auth_ed25519.so" ] &&
        ed=plugin-load-add=auth_ed25519
    cat <<EOF
[mariadbd]
datadir=$MY_DIR/$1
port=$3
bind-address=$HOST
socket=$MY_DIR/$1.sock
pid-file=$MY_DIR/$1.pid
log-error=$MY_DIR/$1.log
tmpdir=$MY_DIR/tmp
server-id=$2
read-only=$4
log-bin=mysql-bin
log-slave-updates=ON
relay-log=relay-bin
binlog-format=ROW
report-host=$HOST
report-port=$3
skip-name-resolve
max-connections=600
max-allowed-packet=64M
$(my_cnf_small)
sync-binlog=0
$ed
EOF
}

my_start() {     # my_start primary|replica : detached mariadbd, ready at the first ping
    local name=$1 pid end
    log "mariadb: start $name"
    # --defaults-file must come first; setsid keeps it out of the caller's process group.
    as_user setsid mariadbd --defaults-file="$MY_DIR/$name.cnf" >>"$MY_DIR/$name.out" 2>&1 </dev/null &
    pid=$!
    end=$(( $(date +%s) + TIMEOUT ))
    until mariadb-admin --no-defaults -S "$MY_DIR/$name.sock" -u root ping >/dev/null 2>&1; do
        if ! alive "$pid"; then
            wait "$pid" 2>/dev/null || true
            log "mariadbd $name exited during start"
            tail -n 20 "$MY_DIR/$name.out" "$MY_DIR/$name.log" >&2 2>/dev/null || true
            return 1
        fi
        [ "$(date +%s)" -lt "$end" ] || { log "timeout starting mariadbd $name"; return 1; }
        sleep 0.05
    done
}

my_up() {
    # Each environment has its own tmpdir: temp-table files are named after the server's pid,
    # and servers of other environments (other pid namespaces) share /tmp.
    as_user mkdir -p "$MY_DIR" "$MY_DIR/tmp"
    log "mariadb: install-db"
    # normal root auth = passwordless root@localhost/127.0.0.1/::1 (the default, socket
    # auth, gives no TCP root). --no-defaults: never read /etc/mysql.
    as_user mariadb-install-db --no-defaults --datadir="$MY_DIR/primary" --tmpdir="$MY_DIR/tmp" --skip-test-db \
        --skip-name-resolve --auth-root-authentication-method=normal \
        --innodb-log-file-size=8M --innodb-buffer-pool-size=32M \
        --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 >"$MY_DIR/install.log" 2>&1 ||
        { cat "$MY_DIR/install.log" >&2; return 1; }
    # A never-started datadir is a valid replica seed (MariaDB has no per-server UUID file).
    as_user cp -a "$MY_DIR/primary" "$MY_DIR/replica"
    my_cnf primary 1 "$MY_PRIMARY_PORT" 0 | as_user tee "$MY_DIR/primary.cnf" >/dev/null
    my_cnf replica 2 "$MY_REPLICA_PORT" 1 | as_user tee "$MY_DIR/replica.cnf" >/dev/null
    my_start primary
    my_start replica
    local ed_user=""
    if [ -n "$(my_sql primary <<<"SELECT 1 FROM information_schema.plugins
            WHERE plugin_name = 'ed25519' AND plugin_status = 'ACTIVE'")" ]; then
        ed_user="CREATE USER 'app_ed'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('app_ed');
                 GRANT ALL ON app.* TO 'app_ed'@'%';"
    fi
    # Users on the primary only: they reach the replica through the binlog (creating them
    # on both breaks replication with 1396). READ_ONLY ADMIN revoked so that writes by
    # `app` on the read-only replica fail with 1290.
    my_sql primary <<SQL
CREATE USER 'repl'@'%' IDENTIFIED BY 'repl';
GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%';
CREATE USER 'app'@'%' IDENTIFIED BY 'app';
GRANT ALL PRIVILEGES ON *.* TO 'app'@'%';
REVOKE READ_ONLY ADMIN ON *.* FROM 'app'@'%';
CREATE DATABASE app;
$ed_user
SQL
    # Empty gtid_slave_pos: start from the primary's first binlog, which holds everything.
    my_sql replica <<SQL
CHANGE MASTER TO MASTER_HOST='$HOST', MASTER_PORT=$MY_PRIMARY_PORT,
  MASTER_USER='repl', MASTER_PASSWORD='repl',
  MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1;
START SLAVE;
SQL
    local gtid
    gtid=$(my_sql primary <<<'SELECT @@gtid_binlog_pos')
    [ "$(my_sql replica <<<"SELECT MASTER_GTID_WAIT('$gtid', $TIMEOUT)")" = 0 ] ||
        { my_sql replica --column-names <<<'SHOW SLAVE STATUS\G' >&2; die "mariadb replica did not reach $gtid"; }
    wait_until "$TIMEOUT" "mariadb slave threads" my_slave_running
    log "mariadb: replicating, replica at gtid $gtid"
}
my_slave_running() {
    [ "$(my_sql replica --column-names <<<'SHOW SLAVE STATUS\G' | grep -cE 'Slave_(IO|SQL)_Running: Yes')" = 2 ]
}

# ---------------------------------------------------------------- stopping

# server_pid SERVER: pid of that running server, checked against its command line so a
# stale pid file or a reused pid never makes us signal a stranger.
server_pid() {
    local file needle pid
    case $1 in
        pg-primary) file=$PG_DIR/primary/postmaster.pid; needle=$PG_DIR/primary ;;
        pg-replica) file=$PG_DIR/replica/postmaster.pid; needle=$PG_DIR/replica ;;
        pg-replica2) file=$PG_DIR/replica2/postmaster.pid; needle=$PG_DIR/replica2 ;;
        pg-tls) file=$PG_DIR/tls/postmaster.pid; needle=$PG_DIR/tls ;;
        my-tls) file=$MY_DIR/tls.pid; needle=$MY_DIR/tls.cnf ;;
        my-primary) file=$MY_DIR/primary.pid; needle=$MY_DIR/primary.cnf ;;
        my-replica) file=$MY_DIR/replica.pid; needle=$MY_DIR/replica.cnf ;;
        *) die "unknown server '$1' (pg-primary|pg-replica|my-primary|my-replica)" ;;
    esac
    [ -f "$file" ] || return 1
    pid=$(head -n 1 "$file" 2>/dev/null | tr -dc 0-9)
    [ -n "$pid" ] && alive "$pid" || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$needle" || return 1
    echo "$pid"
}

# stop_servers MODE SERVER... : signal them all, then wait (SIGKILL after the timeout).
# MODE fast = clean shutdown (PG SIGINT, MariaDB SIGTERM), restartable without recovery;
# MODE now = PG immediate (SIGQUIT), for teardown of disposable data.
stop_servers() {
    local mode=$1 s p sig pids=() end
    shift
    for s in "$@"; do
        p=$(server_pid "$s") || continue
        case $s:$mode in pg-*:fast) sig=INT ;; pg-*:now) sig=QUIT ;; *) sig=TERM ;; esac
        log "stop $s (pid $p, SIG$sig)"
        kill -"$sig" "$p" 2>/dev/null && pids+=("$p")
    done
    end=$(( $(date +%s) + TIMEOUT ))
    for p in "${pids[@]}"; do
        while alive "$p"; do
            if [ "$(date +%s)" -ge "$end" ]; then log "pid $p still alive, SIGKILL"; kill -KILL "$p" 2>/dev/null; fi
            sleep 0.05
        done
    done
}

# ---------------------------------------------------------------- ports

# A random 4-aligned block in 20000..32767: below Linux's ephemeral range (so free_port()
# and outgoing connections never collide with it), reserved with an atomic symlink
# /tmp/.qp-dbs-port-N -> BASE so concurrent `up`s on a shared machine never pick the same
# block. A reservation whose BASE is gone is stale and is taken over.
reserve_ports() {
    local try n link
    for try in $(seq 1 200); do
        n=$(( 20000 + (RANDOM % 3192) * 4 ))
        link=/tmp/.qp-dbs-port-$n
        if [ -L "$link" ] && [ ! -e "$(readlink "$link")/$MARKER" ]; then rm -f "$link"; fi
        ln -s "$BASE" "$link" 2>/dev/null || continue
        if ports_free "$n"; then PORT_BASE=$n; RESERVATION=$link; return 0; fi
        rm -f "$link"
    done
    die "no free block of 4 ports found"
}
ports_free() {
    local p
    for p in "$1" $(($1 + 1)) $(($1 + 2)) $(($1 + 3)); do ! port_busy "$p" || return 1; done
}

# ---------------------------------------------------------------- commands

cmd_up() {
    local what=all owner=""
    BASE=${1:-}
    [ -n "$BASE" ] || usage
    shift
    PORT_BASE=""
    RESERVATION=""
    while [ $# -gt 0 ]; do
        case $1 in
            --port-base) PORT_BASE=${2:?}; shift 2 ;;
            --what) what=${2:?}; shift 2 ;;
            --owner-pid) owner=${2:?}; shift 2 ;;
            *) usage ;;
        esac
    done
    case $BASE in /*) ;; *) die "BASE_DIR must be absolute: $BASE" ;; esac
    case $BASE in *[[:space:]]*) die "BASE_DIR must not contain spaces" ;; esac
    BASE=${BASE%/}
    case $what in all|pg|mariadb) ;; *) die "--what must be pg, mariadb or all" ;; esac
    case $PORT_BASE in ''|[0-9]*) ;; *) die "--port-base must be a number" ;; esac
    [ -z "$owner" ] || alive "$owner" || die "--owner-pid $owner is not running"
    # sun_path holds 107 bytes; both servers refuse longer socket paths.
    [ $(( ${#BASE} + 24 )) -le 107 ] || die "BASE_DIR too long for unix socket paths: $BASE"
    if [ -e "$BASE" ] && [ -n "$(ls -A "$BASE" 2>/dev/null)" ]; then die "$BASE exists and is not empty"; fi

    if [ -n "$PORT_BASE" ]; then    # before creating anything, so a refusal leaves no trace
        [ $(( PORT_BASE + 3 )) -le 65535 ] || die "port base $PORT_BASE out of range"
        ports_free "$PORT_BASE" || die "a port in $PORT_BASE..$((PORT_BASE + 3)) is busy"
    fi
    PG_BIN=$(detect_pg_bin)
    setup_user
    PG_DIR=$BASE/pg
    MY_DIR=$BASE/mariadb
    mkdir -p "$BASE"
    : >"$BASE/$MARKER"
    echo "$$ $(start_time $$)" >"$BASE/up.pid"
    [ "$(id -u)" != 0 ] || chown "$RUN_AS:$RUN_GROUP" "$BASE"
    chmod 755 "$BASE"
    as_user test -w "$BASE" || die "$RUN_AS cannot write $BASE (is a parent directory 0700?)"
    [ -n "$PORT_BASE" ] || reserve_ports
    PG_PRIMARY_PORT=$PORT_BASE PG_REPLICA_PORT=$((PORT_BASE + 1))
    MY_PRIMARY_PORT=$((PORT_BASE + 2)) MY_REPLICA_PORT=$((PORT_BASE + 3))
    WHAT=$what
    local v
    for v in PG_BIN RUN_AS RUN_GROUP WHAT RESERVATION PG_PRIMARY_PORT PG_REPLICA_PORT \
        MY_PRIMARY_PORT MY_REPLICA_PORT; do
        printf '%s=%q\n' "$v" "${!v}"
    done >"$BASE/state.sh"
    # The watchdog goes first: if `up` itself dies half-way, whatever started still stops.
    [ -z "$owner" ] || start_watchdog "$owner"
    log "base=$BASE ports=$PORT_BASE..$((PORT_BASE + 3)) what=$WHAT run_as=$RUN_AS"

    local pg_job="" my_job="" fail=0
    # 3>&-: the servers these start must not hold the caller's stdout open.
    [ "$WHAT" = mariadb ] || { pg_up 3>&- & pg_job=$!; }
    [ "$WHAT" = pg ] || { my_up 3>&- & my_job=$!; }
    [ -z "$pg_job" ] || wait "$pg_job" || { log "PostgreSQL setup failed (logs in $PG_DIR)"; fail=1; }
    [ -z "$my_job" ] || wait "$my_job" || { log "MariaDB setup failed (logs in $MY_DIR)"; fail=1; }
    if [ "$fail" != 0 ]; then
        stop_servers now pg-replica my-replica pg-primary my-primary
        die "setup failed; servers stopped, $BASE kept for its logs (remove with: dbs.sh down $BASE)"
    fi
    write_env
}

write_env() {
    local vars=(DBS_BASE="$BASE" DBS_PORT_BASE="$PORT_BASE")
    [ "$WHAT" = mariadb ] || vars+=(PG_HOST="$HOST" PG_PRIMARY_PORT="$PG_PRIMARY_PORT"
        PG_REPLICA_PORT="$PG_REPLICA_PORT" PG_SOCKET_DIR="$PG_DIR" PG_USER=app PG_PASSWORD=app
        PG_DATABASE=app PG_SUPERUSER=postgres PG_BIN="$PG_BIN"
        PG_PRIMARY_URL="postgres://app:app@$HOST:$PG_PRIMARY_PORT/app"
        PG_REPLICA_URL="postgres://app:app@$HOST:$PG_REPLICA_PORT/app")
    [ "$WHAT" = pg ] || vars+=(MY_HOST="$HOST" MY_PRIMARY_PORT="$MY_PRIMARY_PORT"
        MY_REPLICA_PORT="$MY_REPLICA_PORT" MY_PRIMARY_SOCKET="$MY_DIR/primary.sock"
        MY_REPLICA_SOCKET="$MY_DIR/replica.sock" MY_USER=app MY_PASSWORD=app MY_DATABASE=app
        MY_ROOT_USER=root MY_PRIMARY_URL="mysql://app:app@$HOST:$MY_PRIMARY_PORT/app"
        MY_REPLICA_URL="mysql://app:app@$HOST:$MY_REPLICA_PORT/app")
    printf 'export %s\n' "${vars[@]}" >"$BASE/env.sh"
    log "ready; env in $BASE/env.sh"
    echo "${vars[*]}" >&3
}

# The watchdog is its own session (no terminal signals, not in the test's process group)
# with every inherited descriptor closed, so a caller reading our stdout to EOF is not
# kept waiting by it.
start_watchdog() {
    local st
    st=$(start_time "$1") || die "--owner-pid $1 vanished"
    setsid bash "$SELF" __watch "$BASE" "$1" "$st" </dev/null >>"$BASE/watchdog.log" 2>&1 3>&- &
    log "watchdog pid $! tears down when pid $1 exits"
}

cmd_watch() {    # __watch BASE OWNER START_TIME
    local base=$1 owner=$2 st=$3
    cd /
    while [ -e "$base/$MARKER" ] && [ "$(start_time "$owner" 2>/dev/null)" = "$st" ] && alive "$owner"; do
        sleep 0.5
    done
    if [ -e "$base/$MARKER" ]; then
        log "owner $owner gone: tearing down $base"
        exec bash "$SELF" down "$base"
    fi
}

cmd_down() {
    BASE=${1:?usage: dbs.sh down BASE_DIR}
    BASE=${BASE%/}
    if [ ! -e "$BASE" ]; then log "$BASE does not exist; nothing to do"; return 0; fi
    [ -f "$BASE/$MARKER" ] || die "refusing: $BASE was not created by dbs.sh up (no $MARKER)"
    kill_unfinished_up
    if [ -f "$BASE/state.sh" ]; then
        load_state "$BASE"
        stop_servers now pg-replica pg-replica2 pg-tls my-replica my-tls
        stop_servers now pg-primary my-primary
    else
        setup_user
    fi
    sweep_base
    if [ -n "${RESERVATION:-}" ] && [ "$(readlink "$RESERVATION" 2>/dev/null)" = "$BASE" ]; then
        rm -f "$RESERVATION"
    fi
    rm -rf -- "$BASE"
    log "removed $BASE"
}

# An `up` still running (its owner died mid-setup) would go on creating servers and files
# after we delete them. `up` runs as its own process group, recorded in BASE/up.pid with
# its start time; kill the whole group and wait until no member is left.
kill_unfinished_up() {
    local pid st
    read -r pid st <"$BASE/up.pid" 2>/dev/null || return 0
    [ -n "$pid" ] && [ "$(start_time "$pid" 2>/dev/null)" = "$st" ] || return 0
    log "killing unfinished up (process group $pid)"
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait_until "$TIMEOUT" "process group $pid to exit" group_gone "$pid"
}
group_gone() {   # group_gone PGID: no live (non-zombie) process is in that process group
    local f s
    for f in /proc/[0-9]*/stat; do
        s=$(cat "$f" 2>/dev/null) || continue
        s=${s##*) }
        set -- $s
        [ "$3" != "$1" ] || [ "$1" = Z ] || [ "$1" = X ] || return 1
    done
}

# Safety net for servers whose pid file did not exist yet when `up` was killed: every
# process of the server user whose command line names a path inside BASE.
sweep_base() {
    local pattern pid pids=() cmd end
    pattern=$(printf '%s/' "$BASE" | sed 's/[][\\.*^$+?(){}|]/\\&/g')
    for pid in $(pgrep -u "$RUN_AS" -f -- "$pattern" 2>/dev/null); do
        cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
        case $cmd in *dbs.sh*) continue ;; esac
        log "sweep: stopping pid $pid ($cmd)"
        case $cmd in *postgres*) kill -QUIT "$pid" 2>/dev/null ;; *) kill -TERM "$pid" 2>/dev/null ;; esac
        pids+=("$pid")
    done
    end=$(( $(date +%s) + TIMEOUT ))
    for pid in "${pids[@]}"; do
        while alive "$pid"; do
            [ "$(date +%s)" -lt "$end" ] || kill -KILL "$pid" 2>/dev/null
            sleep 0.05
        done
    done
}

# kill_server SERVER: SIGKILL the server. PostgreSQL's backends notice the postmaster's death
# and exit by themselves; they are waited for (SIGKILLed after the timeout) because a new
# postmaster refuses to start while they still hold the old shared memory. The dead
# postmaster's lock files (data directory, unix socket) go too: its pid may linger as a
# zombie (PID 1 may reap slowly), which a new postmaster would take for a running server.
kill_server() {
    local p c end procs
    p=$(server_pid "$1") || die "$1 is not running"
    procs="$p $(pgrep -P "$p" | tr "\n" " " || true)"
    log "kill $1 (pid $p, SIGKILL)"
    kill -KILL "$p"
    end=$(( $(date +%s) + TIMEOUT ))
    for c in $procs; do
        while alive "$c"; do
            if [ "$(date +%s)" -ge "$end" ]; then log "pid $c still alive, SIGKILL"; kill -KILL "$c" 2>/dev/null; fi
            sleep 0.05
        done
    done
    case $1 in
        pg-primary) rm -f "$PG_DIR/primary/postmaster.pid" "$PG_DIR/.s.PGSQL.$PG_PRIMARY_PORT.lock" ;;
        pg-replica) rm -f "$PG_DIR/replica/postmaster.pid" "$PG_DIR/.s.PGSQL.$PG_REPLICA_PORT.lock" ;;
    esac
}

cmd_stop_start() {   # stop|start|kill BASE SERVER
    local action=$1 server=${3:?usage: dbs.sh $1 BASE_DIR SERVER}
    case $server in pg-primary|pg-replica|my-primary|my-replica) ;; *) die "unknown server '$server'" ;; esac
    load_state "$2"
    case $server in pg-*) started pg ;; *) started mariadb ;; esac || die "$server was not started in $BASE (--what $WHAT)"
    case $action in
        stop) stop_servers fast "$server" ;;
        kill) kill_server "$server" ;;
        start)
            if server_pid "$server" >/dev/null; then log "$server already running"; return 0; fi
            case $server in
                pg-primary) pg_start primary ;;
                pg-replica) pg_start replica ;;
                my-primary) my_start primary ;;
                my-replica) my_start replica ;;
            esac ;;
    esac
}

cmd_add_standby() {  # add-pg-standby BASE PORT
    local port=${2:?usage: dbs.sh add-pg-standby BASE_DIR PORT} lsn
    load_state "$1"
    started pg || die "pg was not started in $BASE (--what $WHAT)"
    [ ! -e "$PG_DIR/replica2" ] || die "$PG_DIR/replica2 exists already"
    log "pg: base backup for a second standby on port $port"
    as_user "$PG_BIN/pg_basebackup" -D "$PG_DIR/replica2" -R -X stream -c fast -C -S qp_replica2 \
        --no-sync -d "host=$HOST port=$PG_PRIMARY_PORT user=postgres application_name=qp_replica2"
    echo "port = $port" | as_user tee -a "$PG_DIR/replica2/postgresql.auto.conf" >/dev/null
    pg_start replica2
    lsn=$(pg_sql "$PG_PRIMARY_PORT" <<<'SELECT pg_current_wal_flush_lsn()')
    PG_REPLICA_PORT=$port wait_until "$TIMEOUT" "second pg standby to replay $lsn" pg_replayed "$lsn"
    log "pg: second standby on $port replayed $lsn"
}

# tls_certs: BASE/tls-certs, made once: a CA, an unrelated CA, a server, a client and an expired
# certificate.
# Built under a temporary name and renamed, so the TLS servers' setups may run concurrently.
tls_certs() {
    CERTS=$BASE/tls-certs
    # Environments set up before the MariaDB TLS server (QP_DBS_ENV) kept them in pg/tls-certs.
    [ -e "$CERTS" ] || [ ! -d "$PG_DIR/tls-certs" ] || as_user ln -s pg/tls-certs "$CERTS"
    local tmp
    if [ ! -e "$CERTS" ]; then
        tmp=$(as_user mktemp -d "$BASE/tls-certs.XXXXXX")
        make_certs "$tmp"
        as_user chmod 755 "$tmp"
        # rename(2) refuses a non-empty target: then another setup made them first.
        as_user mv -T "$tmp" "$CERTS" 2>/dev/null || as_user rm -rf -- "$tmp"
    fi
    # The expired pair has its own directory, made the same way, so that sets made before it
    # (reused environments) get it too.
    [ ! -e "$CERTS/expired" ] || return 0
    tmp=$(as_user mktemp -d "$CERTS/expired.XXXXXX")
    make_expired "$tmp"
    as_user chmod 755 "$tmp"
    as_user mv -T "$tmp" "$CERTS/expired" 2>/dev/null || as_user rm -rf -- "$tmp"
}

# make_expired DIR (inside the certificate set): DIR/expired.crt + .key, issued by ca.crt for
# localhost/127.0.0.1 with CN app_cert, for servers and clients alike, valid only during 2020.
# `openssl x509 -req` cannot backdate before OpenSSL 3.4; `openssl ca` can, given a config.
make_expired() {
    local d=$1
    printf '%s\n' '[ca]' 'default_ca = backdating' '[backdating]' 'database = index.txt' \
        'new_certs_dir = .' 'serial = serial' 'default_md = sha256' 'policy = any_cn' '[any_cn]' \
        'commonName = supplied' '[expired]' 'subjectAltName = DNS:localhost,IP:127.0.0.1' \
        'basicConstraints = CA:FALSE' 'keyUsage = critical,digitalSignature' \
        'extendedKeyUsage = serverAuth,clientAuth' | as_user tee "$d/ca.cnf" >/dev/null
    as_user openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$d/expired.key" -out "$d/expired.csr" -subj "/CN=app_cert" 2>/dev/null
    # openssl ca keeps its database and serial in the working directory.
    as_user sh -c 'cd "$1" && : >index.txt && echo 01 >serial &&
        openssl ca -batch -config ca.cnf -cert ../ca.crt -keyfile ../ca.key -in expired.csr \
            -out expired.crt -notext -extensions expired \
            -startdate 20200101000000Z -enddate 20210101000000Z 2>/dev/null' sh "$d"
}

make_certs() {    # make_certs DIR
    local c=$1 name
    for name in ca other-ca; do
        as_user openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
            -keyout "$c/$name.key" -out "$c/$name.crt" -subj "/CN=qp-test-$name" \
            -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
    done
    printf '%s\n' subjectAltName=DNS:localhost,IP:127.0.0.1 basicConstraints=CA:FALSE \
        keyUsage=critical,digitalSignature extendedKeyUsage=serverAuth | as_user tee "$c/server.ext" >/dev/null
    printf '%s\n' basicConstraints=CA:FALSE keyUsage=critical,digitalSignature \
        extendedKeyUsage=clientAuth | as_user tee "$c/client.ext" >/dev/null
    for name in server:localhost client:app_cert; do
        as_user openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -keyout "$c/${name%%:*}.key" -out "$c/${name%%:*}.csr" -subj "/CN=${name#*:}" 2>/dev/null
        as_user openssl x509 -req -in "$c/${name%%:*}.csr" -CA "$c/ca.crt" -CAkey "$c/ca.key" \
            -CAcreateserial -days 3650 -extfile "$c/${name%%:*}.ext" -out "$c/${name%%:*}.crt" 2>/dev/null
    done
    as_user chmod 600 "$c/server.key"
}

cmd_add_tls() {  # add-pg-tls BASE PORT
    local port=${2:?usage: dbs.sh add-pg-tls BASE_DIR PORT} d c
    load_state "$1"
    started pg || die "pg was not started in $BASE (--what $WHAT)"
    d=$PG_DIR/tls
    # Servers reused across test runs (QP_DBS_ENV) keep theirs: its port is in tls.port.
    if server_pid pg-tls >/dev/null; then tls_certs; log "pg: TLS-only server already up"; return 0; fi
    [ ! -e "$d" ] || die "$d exists already"
    command -v openssl >/dev/null || die "openssl is needed to make the test certificates"
    log "pg: certificates and initdb for a TLS-only server on port $port"
    tls_certs
    c=$CERTS
    as_user "$PG_BIN/initdb" -D "$d" -U postgres -A trust -E UTF8 --locale=C -N --no-instructions >/dev/null
    as_user tee -a "$d/postgresql.conf" >/dev/null <<EOF

# ---- dbs.sh add-pg-tls ----
listen_addresses = '$HOST'
port = $port
unix_socket_directories = '$PG_DIR'
max_connections = 50
shared_buffers = 16MB
fsync = off
full_page_writes = off
password_encryption = 'scram-sha-256'
log_min_messages = warning
ssl = on
ssl_cert_file = '$c/server.crt'
ssl_key_file = '$c/server.key'
ssl_ca_file = '$c/ca.crt'
EOF
    as_user tee "$d/pg_hba.conf" >/dev/null <<EOF
local      all  all       trust
hostnossl  all  all       127.0.0.1/32  reject
hostssl    all  postgres  127.0.0.1/32  trust
hostssl    all  app_cert  127.0.0.1/32  cert
hostssl    all  all       127.0.0.1/32  scram-sha-256
EOF
    pg_start tls
    pg_sql "$port" <<'SQL'
CREATE ROLE app LOGIN PASSWORD 'app';
CREATE ROLE app_cert LOGIN;
CREATE DATABASE app OWNER app;
SQL
    echo "$port" | as_user tee "$PG_DIR/tls.port" >/dev/null
    log "pg: TLS-only server on $port"
}

cmd_add_my_tls() {  # add-my-tls BASE PORT
    local port=${2:?usage: dbs.sh add-my-tls BASE_DIR PORT} d
    load_state "$1"
    started mariadb || die "mariadb was not started in $BASE (--what $WHAT)"
    d=$MY_DIR/tls
    # Servers reused across test runs (QP_DBS_ENV) keep theirs: its port is in tls.port.
    if server_pid my-tls >/dev/null; then log "mariadb: TLS-only server already up"; return 0; fi
    [ ! -e "$d" ] || die "$d exists already"
    command -v openssl >/dev/null || die "openssl is needed to make the test certificates"
    log "mariadb: certificates and install-db for a TLS-only server on port $port"
    tls_certs
    as_user mariadb-install-db --no-defaults --datadir="$d" --tmpdir="$MY_DIR/tmp" --skip-test-db \
        --skip-name-resolve --auth-root-authentication-method=normal \
        --innodb-log-file-size=8M --innodb-buffer-pool-size=32M \
        --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 >"$MY_DIR/tls-install.log" 2>&1 ||
        { cat "$MY_DIR/tls-install.log" >&2; return 1; }
    as_user tee "$MY_DIR/tls.cnf" >/dev/null <<EOF
[mariadbd]
datadir=$d
port=$port
bind-address=$HOST
socket=$MY_DIR/tls.sock
pid-file=$MY_DIR/tls.pid
log-error=$MY_DIR/tls.log
tmpdir=$MY_DIR/tmp
server-id=3
skip-name-resolve
max-connections=200
$(my_cnf_small)
ssl-ca=$CERTS/ca.crt
ssl-cert=$CERTS/server.crt
ssl-key=$CERTS/server.key
require-secure-transport=ON
EOF
    my_start tls
    # Over the unix socket, which require_secure_transport counts as secure.
    my_sql tls <<SQL
CREATE USER 'app'@'%' IDENTIFIED BY 'app';
GRANT ALL PRIVILEGES ON *.* TO 'app'@'%';
CREATE USER 'app_x509'@'%' IDENTIFIED BY 'app' REQUIRE X509;
GRANT ALL ON app.* TO 'app_x509'@'%';
CREATE DATABASE app;
SQL
    [ "$(my_sql tls <<<'SELECT @@have_ssl')" = YES ] || die "the MariaDB TLS server has no TLS (see $MY_DIR/tls.log)"
    echo "$port" | as_user tee "$MY_DIR/tls.port" >/dev/null
    log "mariadb: TLS-only server on $port"
}

cmd_replication() {  # pause-replication|resume-replication BASE pg|mariadb
    local action=$1 kind=${3:?usage: dbs.sh $1 BASE_DIR pg|mariadb}
    load_state "$2"
    started "$kind" || die "$kind was not started in $BASE (--what $WHAT)"
    case $action:$kind in
        # pg_wal_replay_pause() takes effect on return: no further record is applied.
        pause-replication:pg) pg_sql "$PG_REPLICA_PORT" <<<'SELECT pg_wal_replay_pause()' >/dev/null ;;
        resume-replication:pg) pg_sql "$PG_REPLICA_PORT" <<<'SELECT pg_wal_replay_resume()' >/dev/null ;;
        # STOP SLAVE SQL_THREAD returns once the applier has stopped; the IO thread goes on.
        pause-replication:mariadb) my_sql replica <<<'STOP SLAVE SQL_THREAD' ;;
        resume-replication:mariadb) my_sql replica <<<'START SLAVE SQL_THREAD' ;;
        *) die "kind must be pg or mariadb" ;;
    esac
    log "$action $kind done"
}

# Everything the IO thread received is applied (the SQL thread's position reached it).
my_relay_applied() {
    local status field
    status=$(my_sql replica --column-names <<<'SHOW SLAVE STATUS\G')
    field() { sed -n "s/^ *$1: //p" <<<"$status"; }
    [ -n "$(field Read_Master_Log_Pos)" ] &&
        [ "$(field Read_Master_Log_Pos)" = "$(field Exec_Master_Log_Pos)" ] &&
        [ "$(field Master_Log_File)" = "$(field Relay_Master_Log_File)" ]
}

cmd_promote() {  # promote BASE pg|mariadb
    local kind=${2:?usage: dbs.sh promote BASE_DIR pg|mariadb}
    load_state "$1"
    started "$kind" || die "$kind was not started in $BASE (--what $WHAT)"
    case $kind in
        pg) as_user "$PG_BIN/pg_ctl" -D "$PG_DIR/replica" -w -t "$TIMEOUT" promote >/dev/null ;;
        mariadb)
            my_sql replica <<<'STOP SLAVE IO_THREAD'
            wait_until "$TIMEOUT" "mariadb relay log applied" my_relay_applied
            my_sql replica <<<'STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0' ;;
        *) die "kind must be pg or mariadb" ;;
    esac
    log "promote $kind done"
}

CMD=${1:-}
[ $# -gt 0 ] && shift
case $CMD in
    # fd 3 = the caller's stdout, reserved for the single result line; everything else
    # (and every server we start) writes to stderr and never holds the caller's stdout.
    # `up` runs as its own process group (setsid), so `down` can kill an unfinished one
    # with all its children; setsid forks (and -w waits) only if we already lead a group.
    up) exec setsid -w bash "$SELF" __up "$@" ;;
    __up) CMD=up; exec 3>&1 1>&2; cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    stop|start|kill) cmd_stop_start "$CMD" "$@" ;;
    pause-replication|resume-replication) cmd_replication "$CMD" "$@" ;;
    promote) cmd_promote "$@" ;;
    add-pg-standby) cmd_add_standby "$@" ;;
    add-pg-tls) cmd_add_tls "$@" ;;
    add-my-tls) cmd_add_my_tls "$@" ;;
    __watch) cmd_watch "$@" ;;
    *) usage ;;
esac
