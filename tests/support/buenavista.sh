#!/usr/bin/env bash
# tests/support/buenavista.sh - the analytics engine of the HTAP tests (tests/it/htap_duckdb.rs):
# DuckDB behind buenavista, a third-party PostgreSQL-wire server, in a venv of its own with
# every package pinned (buenavista 0.5.0 needs duckdb 1.1.3: newer DuckDB breaks its SELECT
# path). Installed from PyPI only when the venv is missing or was built from other pins.
#
#   buenavista.sh install VENV                    # idempotent; safe to run concurrently
#   buenavista.sh seed VENV DBFILE SQL            # runs SQL on a DuckDB file (the server must be down)
#   buenavista.sh serve VENV DBFILE PORT          # foreground; logs every statement it runs to stderr
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# --no-deps with the whole closure pinned: the server needs no more than these (buenavista's
# HTTP extras are not used) and a new release of a transitive package cannot change the test.
PINS="buenavista==0.5.0 duckdb==1.1.3 pyarrow==26.0.1 sqlglot==30.31.0 python-dateutil==2.9.0.post0 six==1.17.0"

install() {
    local venv=$1
    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    flock 9
    if [ -f "$venv/.pins" ] && [ "$(cat "$venv/.pins")" = "$PINS" ]; then
        return 0
    fi
    rm -rf "$venv"
    python3 -m venv "$venv" >&2 || {
        echo "python3 -m venv failed: install python3-venv (.ci/deps.sh does)" >&2
        exit 1
    }
    # shellcheck disable=SC2086
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps $PINS >&2
    "$venv/bin/python" -c 'import buenavista.examples.duckdb_postgres, dateutil.parser' >&2
    echo "$PINS" >"$venv/.pins"
}

case "${1:-}" in
install) install "$2" ;;
seed) "$2/bin/python" -c 'import sys, duckdb; c = duckdb.connect(sys.argv[1]); c.execute(sys.argv[2]); c.close()' "$3" "$4" ;;
serve) exec "$2/bin/python" "$HERE/buenavista_server.py" "$3" "$4" ;;
*)
    echo "usage: $0 install VENV | seed VENV DBFILE SQL | serve VENV DBFILE PORT" >&2
    exit 2
    ;;
esac
