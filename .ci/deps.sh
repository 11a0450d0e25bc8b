#!/usr/bin/env bash
# .ci/deps.sh - installs, with apt-get and only when absent, the system packages the tests,
# the perf scripts and the demo need on a fresh Debian 12 machine. Used by .ci/run and
# perf/demo.sh.
set -euo pipefail
log() { printf '[deps] %s\n' "$*" >&2; }

# Each check names a program the suite or the perf scripts use (PostgreSQL: any major).
pg_server_present() { compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; }
missing=()
pg_server_present || missing+=(postgresql postgresql-contrib)
command -v psql >/dev/null || missing+=(postgresql-client)
command -v mariadbd >/dev/null || missing+=(mariadb-server)
command -v mariadb >/dev/null || missing+=(mariadb-client)
command -v sysbench >/dev/null || missing+=(sysbench)
command -v pgbouncer >/dev/null || missing+=(pgbouncer)
# perf/run.sh: HAProxy in TCP mode is the MySQL line's floor (#39); strace and callgrind count
# system calls and instructions per transaction.
command -v haproxy >/dev/null || missing+=(haproxy)
command -v strace >/dev/null || missing+=(strace)
command -v valgrind >/dev/null || missing+=(valgrind)
command -v promtool >/dev/null || missing+=(prometheus)   # promtool checks /metrics output
# PgBouncer's exporter scrapes the admin console (tests/it/console.rs).
command -v prometheus-pgbouncer-exporter >/dev/null || missing+=(prometheus-pgbouncer-exporter)
command -v setpriv >/dev/null || missing+=(util-linux)     # runs the servers unprivileged as root
command -v openssl >/dev/null || missing+=(openssl)        # test certificates of the TLS-only server (#38)
command -v ss >/dev/null || missing+=(iproute2)           # free-port checks
command -v curl >/dev/null || missing+=(curl)              # the demo calls the admin API
command -v cc >/dev/null || missing+=(build-essential)     # linker for cargo
command -v c++ >/dev/null || missing+=(g++)                 # libFuzzer, built when .ci/run checks fuzz/
command -v systemd-analyze >/dev/null || missing+=(systemd)  # verifies querypilot.service
# Client connectors the MySQL listener is tested with (tests/it/connectors.rs).
/usr/bin/python3 -c 'import pymysql' 2>/dev/null || missing+=(python3-pymysql)
# MariaDB challenges a login no account admits with a random loaded plugin (ed25519 here):
# PyMySQL needs PyNaCl to answer it and see the server's 1045 (tests/it/passthrough_identity.rs).
/usr/bin/python3 -c 'import nacl' 2>/dev/null || missing+=(python3-nacl)
# PostgreSQL client libraries the prepared-statement, pipeline and batch tests drive
# (tests/it/pg_prepared_ddl.rs, pg_pipeline.rs, pg_stream.rs).
/usr/bin/python3 -c 'import psycopg' 2>/dev/null || missing+=(python3-psycopg)
/usr/bin/python3 -c 'import asyncpg' 2>/dev/null || missing+=(python3-asyncpg)
# psycopg2 interpolates values on the client by standard_conforming_strings (tests/it/bridge_values.rs).
/usr/bin/python3 -c 'import psycopg2' 2>/dev/null || missing+=(python3-psycopg2)
# A venv for psycopg[binary] from PyPI, whose bundled libpq 18 asks for protocol 3.2
# (tests/it/frontdoor.rs creates it under the target directory).
/usr/bin/python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
[ -f /usr/share/java/mariadb-java-client.jar ] || missing+=(libmariadb-java)
[ -f /usr/share/java/postgresql.jar ] || missing+=(libpostgresql-jdbc-java)   # tests/it/htap_pg.rs
command -v javac >/dev/null || missing+=(default-jdk-headless)   # runs the JDBC check as a source file
# The HTAP tests install buenavista + DuckDB from PyPI into a venv of their own
# (tests/support/buenavista.sh); Debian's python3 needs this package to create one.
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)

if [ ${#missing[@]} -gt 0 ]; then
    log "installing: ${missing[*]}"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
    log "all system packages present"
fi

