# perf/lib.sh - what the single-router perf scripts share: building the router, a private
# PostgreSQL with pgbench data (torn down on exit), a free port, starting the router and
# waiting for it, and the CPU time of a process. Sourced, not run; the caller sets ROOT and
# `set -euo pipefail`.

log() { printf '[perf] %s\n' "$*" >&2; }

# build_router: `cargo build --release` unless $1 is 0; sets BIN.
build_router() {
    if [ "${1:-1}" != 0 ]; then
        log "cargo build --release"
        (cd "$ROOT" && cargo build --release --quiet)
    fi
    BIN="$ROOT/target/release/querypilot"
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
    for _ in $(seq 600); do
        "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" && return
        sleep 0.1
    done
    log "the router did not answer on port $port: see $BASE/router.log"
    exit 1
}

# cpu_ticks PID: utime + stime (fields 14 and 15 of /proc/PID/stat, in clock ticks).
cpu_ticks() {
    local s f
    s=$(cat "/proc/$1/stat")
    s=${s##*) }
    read -r -a f <<<"$s"
    echo $((f[11] + f[12]))
}
