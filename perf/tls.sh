#!/usr/bin/env bash
# perf/tls.sh - TLS on both legs (#38): `pgbench -S` with `sslmode=require` to the router and
# from the router to a TLS-only PostgreSQL, beside PgBouncer with `client_tls_sslmode = require`
# and `server_tls_sslmode = require`, in interleaved rounds (the order alternating); then the
# router's CPU per TLS handshake, full and resumed.
#
#   perf/tls.sh [--no-build]
#
# Starts its own PostgreSQL with tests/support/dbs.sh (torn down on exit) and the TLS-only
# server of `dbs.sh add-pg-tls` (its certificates serve both proxies too), loads pgbench data
# into its database `app` and builds the router (`cargo build --release`; --no-build uses the
# binary under $CARGO_TARGET_DIR or target/). Both proxies: one thread/core, transaction
# pooling, POOL server connections, md5 client logins (PgBouncer's; a SCRAM login would bill
# them unequally), TLS 1.3 both ways. Per round and proxy: `pgbench -n -S -M simple -c CLIENTS
# -j JOBS -T SECONDS`; reported: median TPS and CPU per transaction (utime+stime of the proxy,
# /proc/PID/stat) with min–max. Handshakes: HANDSHAKES fresh connections (`pgbench -C`, one
# `SELECT` each) through a second router listener with `tls = "allow"`, once with
# `sslmode=require` and once with `sslmode=disable`; the difference of router CPU per
# connection is one full handshake (libpq resumes no sessions). Resumed handshakes: perf/
# tls_connect.py opens HANDSHAKES connections to a third listener with `tls_resumption = true`
# (SSLRequest, TLS, StartupMessage, the password request, close) in plaintext, with full
# handshakes and with each offering the previous one's session; the router CPU per connection
# less the plaintext one is the cost of a full and of a resumed handshake. The load average is
# printed before and after: the machine may be shared.
#
# Environment (defaults): ROUNDS=5 SECONDS_PER_RUN=10 CLIENTS=16 JOBS=2 SCALE=10 POOL=8
# HANDSHAKES=1000
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${ROUNDS:-5}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
CLIENTS=${CLIENTS:-16}
JOBS=${JOBS:-2}
SCALE=${SCALE:-10}
POOL=${POOL:-8}
HANDSHAKES=${HANDSHAKES:-1000}

# shellcheck source=perf/lib.sh
. "$ROOT/perf/lib.sh"

build_router "$([ "${1:-}" = "--no-build" ] && echo 0 || echo 1)"
BASE=$(mktemp -d /tmp/qp-perf-tls-XXXXXX)
rmdir "$BASE"
PIDS=()
trap stop_pids_and_dbs EXIT
log "starting PostgreSQL under $BASE, and a TLS-only one beside it"
eval "$("$ROOT/tests/support/dbs.sh" up "$BASE" --what pg --owner-pid $$)"
TLS_PG_PORT=$(free_port)
"$ROOT/tests/support/dbs.sh" add-pg-tls "$BASE" "$TLS_PG_PORT"
CERTS=$BASE/tls-certs
export PGPASSWORD=app PGSSLMODE=require
log "pgbench -i -s $SCALE (over TLS)"
pgbench -i -q -s "$SCALE" -h 127.0.0.1 -p "$TLS_PG_PORT" -U app app >/dev/null 2>&1

PORT=$(free_port)
ALLOW_PORT=$(free_port)
RESUME_PORT=$(free_port)
cat >"$BASE/querypilot.toml" <<EOF
[general]
cores = [0]
log_level = "warn"
[[listeners]]
protocol = "postgres"
bind = "127.0.0.1:$PORT"
auth_method = "md5"
tls = "require"
tls_cert_file = "$CERTS/server.crt"
tls_key_file = "$CERTS/server.key"
[[listeners]]
protocol = "postgres"
bind = "127.0.0.1:$ALLOW_PORT"
auth_method = "md5"
tls = "allow"
tls_cert_file = "$CERTS/server.crt"
tls_key_file = "$CERTS/server.key"
[[listeners]]
protocol = "postgres"
bind = "127.0.0.1:$RESUME_PORT"
auth_method = "md5"
tls = "allow"
tls_cert_file = "$CERTS/server.crt"
tls_key_file = "$CERTS/server.key"
tls_resumption = true
[pools.app]
mode = "transaction"
username = "app"
password = "app"
database = "app"
max_connections = $POOL
tls = "require"
backends = [{ host = "127.0.0.1", port = $TLS_PG_PORT }]
[routing]
default_pool = "app"
EOF
start_router "$BASE/querypilot.toml" "$PORT"
PIDS+=("$ROUTER_PID")

PGB_PORT=$(free_port)
PG_PRIMARY_PORT=$TLS_PG_PORT PG_USER=app PG_PASSWORD=app PGB_EXTRA="client_tls_sslmode = require
client_tls_cert_file = $CERTS/server.crt
client_tls_key_file = $CERTS/server.key
server_tls_sslmode = require" start_pgbouncer "$BASE/pgbouncer" app "$PGB_PORT" "$POOL"
PIDS+=("$PGB_PID")

HZ=$(getconf CLK_TCK)
declare -A PID_OF=([router]=$ROUTER_PID [pgbouncer]=$PGB_PID) PORT_OF=([router]=$PORT [pgbouncer]=$PGB_PORT)
# Both proxies log in to the server and warm up first.
for t in router pgbouncer; do
    pgbench -n -S -c "$CLIENTS" -j "$JOBS" -t 50 -h 127.0.0.1 -p "${PORT_OF[$t]}" -U app app >/dev/null
done

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
RESULTS=$BASE/rounds.tsv
for round in $(seq "$ROUNDS"); do
    order=(router pgbouncer)
    [ $((round % 2)) = 0 ] && order=(pgbouncer router)
    for t in "${order[@]}"; do
        t0=$(cpu_ticks "${PID_OF[$t]}")
        out=$(pgbench -n -S -M simple -c "$CLIENTS" -j "$JOBS" -T "$SECONDS_PER_RUN" -h 127.0.0.1 -p "${PORT_OF[$t]}" -U app app 2>&1)
        t1=$(cpu_ticks "${PID_OF[$t]}")
        tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
        tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
        printf '%s\t%s\t%s\t%s\n' "$t" "$round" "${tps:-0}" "$(((t1 - t0) * 1000000 / HZ * 1000 / ${tx:-1}))" >>"$RESULTS"
        log "round $round $t: ${tps:-?} tps, $tx transactions, $((t1 - t0)) ticks"
    done
done

# handshake_ns MODE: router CPU (ns) per fresh connection with sslmode=MODE through the allow
# listener: login (md5), one SELECT, close.
handshake_ns() {
    local t0 t1
    t0=$(cpu_ticks "$ROUTER_PID")
    PGSSLMODE=$1 pgbench -n -C -S -c 1 -j 1 -t "$HANDSHAKES" -h 127.0.0.1 -p "$ALLOW_PORT" -U app app >/dev/null 2>&1 ||
        log "pgbench -C with sslmode=$1 failed"
    t1=$(cpu_ticks "$ROUTER_PID")
    echo $(((t1 - t0) * 1000000000 / HZ / HANDSHAKES))
}
TLS_NS=(); PLAIN_NS=()
for _ in 1 2 3; do
    TLS_NS+=("$(handshake_ns require)")
    PLAIN_NS+=("$(handshake_ns disable)")
done
# connect_ns MODE [1.2]: router CPU (ns) per tls_connect.py connection in MODE (plain, full,
# resumed), with TLS 1.2 at most when told.
connect_ns() {
    local t0 t1 reused
    t0=$(cpu_ticks "$ROUTER_PID")
    reused=$(python3 "$ROOT/perf/tls_connect.py" "$RESUME_PORT" "$HANDSHAKES" "$@")
    t1=$(cpu_ticks "$ROUTER_PID")
    [ "$1" != resumed ] || [ "$reused" -ge $((HANDSHAKES - 1)) ] || log "only $reused of $HANDSHAKES resumed"
    echo $(((t1 - t0) * 1000000000 / HZ / HANDSHAKES))
}
C_PLAIN=(); C_FULL=(); C_RESUMED=(); C_FULL12=(); C_RESUMED12=()
for _ in 1 2 3; do
    C_PLAIN+=("$(connect_ns plain)")
    C_FULL+=("$(connect_ns full)")
    C_RESUMED+=("$(connect_ns resumed)")
    C_FULL12+=("$(connect_ns full 1.2)")
    C_RESUMED12+=("$(connect_ns resumed 1.2)")
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$RESULTS" "${TLS_NS[*]}" "${PLAIN_NS[*]}" "${C_PLAIN[*]}" "${C_FULL[*]}" "${C_RESUMED[*]}" "${C_FULL12[*]}" "${C_RESUMED12[*]}" <<PY
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
tls, plain, c_plain, c_full, c_resumed, c_full12, c_resumed12 = ([int(x) for x in a.split()] for a in sys.argv[2:9])
def span(xs, fmt):
    return f"{fmt(statistics.median(xs))} ({fmt(min(xs))}–{fmt(max(xs))})"
print("load average before: $LOAD_BEFORE; after: $LOAD_AFTER")
print("pgbench -S -M simple -c $CLIENTS -j $JOBS -T $SECONDS_PER_RUN, $ROUNDS interleaved rounds, TLS both legs\n")
print("| proxy | TPS median (min–max) | proxy CPU µs/tx median (min–max) |")
print("|---|---:|---:|")
for t in ("router", "pgbouncer"):
    tps = [float(r[2]) for r in rows if r[0] == t]
    ns = [int(r[3]) for r in rows if r[0] == t]
    print(f"| {t} | {span(tps, lambda v: f'{v:,.0f}')} | {span(ns, lambda v: f'{v / 1000:.1f}')} |")
print(f"\nrouter CPU per connection ($HANDSHAKES x pgbench -C, 3 runs each): sslmode=require "
      f"{span(tls, lambda v: f'{v / 1000:.0f}')} µs, sslmode=disable {span(plain, lambda v: f'{v / 1000:.0f}')} µs; "
      f"one full TLS handshake ≈ {(statistics.median(tls) - statistics.median(plain)) / 1000:.0f} µs of one core")
med, us = statistics.median, lambda v: f"{v / 1000:.0f}"
print(f"router CPU µs per tls_connect.py connection ($HANDSHAKES x, 3 runs each): plaintext {span(c_plain, us)}")
for version, full, resumed in (("1.3", c_full, c_resumed), ("1.2", c_full12, c_resumed12)):
    print(f"  TLS {version}: full {span(full, us)}, resumed {span(resumed, us)}; one full handshake ≈ "
          f"{us(med(full) - med(c_plain))} µs, one resumed ≈ {us(med(resumed) - med(c_plain))} µs")
PY
