#!/usr/bin/env bash
# perf/pg-regress.sh - PostgreSQL 15's own regression suite (pg_regress, parallel_schedule, 217
# tests) run directly against the server and through the router in session and transaction
# mode, *without* --use-existing: pg_regress drops and creates its database `regression`
# through the router, which needs the router to let go of it first and to serve a database no
# pool names (#36: [pool_template]). Prints one line per run (failed tests and which of them
# fail only through the router) and leaves each run's regression.diffs under $BASE.
#
# Usage: perf/pg-regress.sh [RUN...]        RUN: direct | session | transaction (default: all)
# Environment:
#   QP_BIN=path      the router binary (default: a release build)
#   RESULTS=dir      where each run's output and regression.diffs are kept
#                    (default /tmp/qp-regress-results)
#   REGRESS_SRC=dir  src/test/regress of the server's version with regress.so built; default:
#                    fetched with `apt-get source postgresql-15` (a deb-src line for it is added
#                    under /etc/apt/sources.list.d) and regress.so built from it, under
#                    /tmp/qp-regress-src
#
# The tests' sources must match the server's minor version: Debian's archive may only offer an
# older one than the server installed (15.18 sources against a 15.20 server fail 9 tests
# directly, all in COPY-from-stdin handling and rule deparsing that changed in between); the
# direct run is the baseline the router runs are compared with.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=perf/lib.sh
. "$ROOT/perf/lib.sh"
RUNS=("$@")
[ ${#RUNS[@]} -gt 0 ] || RUNS=(direct session transaction)
if [ -n "${QP_BIN:-}" ]; then BIN=$QP_BIN; else build_router; fi
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_REGRESS=$(dirname "$("$PG_BIN/pg_config" --pgxs 2>/dev/null || pg_config --pgxs)")/../test/regress/pg_regress

fetch_sources() {
    local dir=/tmp/qp-regress-src
    if [ -f "$dir/src/test/regress/regress.so" ]; then
        REGRESS_SRC=$dir/src/test/regress
        return
    fi
    log "fetching postgresql-15 sources into $dir"
    local list=/etc/apt/sources.list.d/qp-regress-src.sources
    [ -f "$list" ] || printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' >"$list"
    apt-get update -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- >/dev/null
    mkdir -p "$dir.dl" && (cd "$dir.dl" && apt-get source --download-only postgresql-15 >/dev/null)
    rm -rf "$dir" && mkdir -p "$dir"
    tar xjf "$dir.dl"/postgresql-15_*.orig.tar.bz2 -C "$dir" --strip-components=1
    log "building regress.so"
    (cd "$dir" && ./configure --without-readline --without-icu --without-zlib >/dev/null &&
        make -C src/backend generated-headers >/dev/null && make -C src/test/regress regress.so >/dev/null)
    REGRESS_SRC=$dir/src/test/regress
}
[ -n "${REGRESS_SRC:-}" ] || fetch_sources

BASE=$(mktemp -d /tmp/qp-regress-XXXXXX)
rmdir "$BASE"
ROUTER_PID=""
trap perf_cleanup EXIT
log "starting PostgreSQL under $BASE"
eval "$("$ROOT/tests/support/dbs.sh" up "$BASE" --what pg --owner-pid $$)"
# The server writes COPY results into the output directory, and pg_regress runs as its user.
cp -r "$REGRESS_SRC" "$BASE/regress"
cp "$PG_BIN/../lib/autoinc.so" "$PG_BIN/../lib/refint.so" "$BASE/regress/"
chown -R postgres: "$BASE/regress"

# run_regress NAME PORT: the whole schedule against PORT as the superuser; sets FAILED to the
# names of the failing tests.
run_regress() {
    local out=$BASE/out-$1
    mkdir -p "$out" && chown postgres: "$out"
    (cd "$BASE/regress" && setpriv --reuid=postgres --regid=postgres --init-groups \
        env HOME="$BASE" PGPASSWORD=pw "$PG_REGRESS" --inputdir=. --bindir="$PG_BIN" --dlpath=. \
        --max-connections=8 --schedule=parallel_schedule --host=127.0.0.1 --port="$2" --user=postgres \
        --outputdir="$out" >"$out/pg_regress.log" 2>&1) || true
    FAILED=$(sed -n 's/^[ ]*\(test \)\{0,1\}\([a-z0-9_]*\)[ ]*\.\.\. FAILED.*/\2/p' "$out/pg_regress.log" | sort)
    SUMMARY=$(grep -E 'tests (passed|failed)|All [0-9]+ tests' "$out/pg_regress.log" | tr -s ' ' || echo "did not finish")
}

# hold_regression PORT: makes the router on PORT hold idle connections to `regression` (three
# clients at once through it; created directly first if missing), as a router that served an
# earlier run does, so the suite's DROP DATABASE needs the router to let go of it (#36).
hold_regression() {
    local pids=() direct=("$PG_BIN/psql" -X -q -At -h 127.0.0.1 -p "$PG_PRIMARY_PORT" -U postgres -d postgres)
    "${direct[@]}" -c "SELECT 1 FROM pg_database WHERE datname = 'regression'" | grep -q 1 ||
        "${direct[@]}" -c "CREATE DATABASE regression"
    for _ in 1 2 3; do
        PGPASSWORD=pw "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$1" -U postgres -d regression -c "SELECT pg_sleep(0.2)" >/dev/null &
        pids+=($!)
    done
    wait "${pids[@]}"
    HELD=$("${direct[@]}" -c "SELECT count(*) FROM pg_stat_activity WHERE datname = 'regression'")
}

# router_conf MODE PORT: one pool on the server's `postgres` database as the superuser
# (trusted; the router's password is "pw"), which is also the template of every other
# database the suite uses (`regression`, the databases its tests create and drop).
router_conf() {
    cat <<EOF
[general]
cores = [0, 1]
shutdown_drain = "1s"

[[listeners]]
protocol = "postgres"
bind = "127.0.0.1:$2"

[pools.postgres]
mode = "$1"
username = "postgres"
password = "pw"
database = "postgres"
min_connections = 1
max_connections = 40
backends = [{ host = "127.0.0.1", port = $PG_PRIMARY_PORT }]

[routing]
default_pool = "postgres"

[pool_template]
postgres = "postgres"
EOF
}

DIRECT=""
for run in "${RUNS[@]}"; do
    started=$(date +%s)
    if [ "$run" = direct ]; then
        run_regress direct "$PG_PRIMARY_PORT"
        DIRECT=$FAILED
    else
        port=$(free_port)
        router_conf "$run" "$port" >"$BASE/$run.toml"
        start_router "$BASE/$run.toml" "$port"
        hold_regression "$port"
        run_regress "$run" "$port"
        kill -TERM "$ROUTER_PID" && wait "$ROUTER_PID" 2>/dev/null || true
        ROUTER_PID=""
    fi
    extra=$(comm -13 <(echo "$DIRECT") <(echo "$FAILED") | tr '\n' ' ')
    [ "$run" = direct ] || printf '%-12s router connections to regression before the run: %s\n' "" "$HELD"
    printf '%-12s %-28s %4ss  failing: %s\n' "$run" "$SUMMARY" "$(($(date +%s) - started))" "$(echo "$FAILED" | tr '\n' ' ')"
    [ "$run" = direct ] || printf '%-12s only through the router: %s\n' "" "${extra:-none}"
done
# The databases go with $BASE (EXIT trap); the runs' outputs are kept.
KEEP=${RESULTS:-/tmp/qp-regress-results}
rm -rf "$KEEP" && mkdir -p "$KEEP" && cp -r "$BASE"/out-* "$KEEP"/
log "outputs and regression.diffs of each run: $KEEP"
