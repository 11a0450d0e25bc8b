#!/usr/bin/env bash
# perf/causal_trials.sh - causal reads under replication delay (#34): TRIALS cross-connection
# write-then-read trials (perf/causal_trials.py: a writer inserts and hands its token to a
# reader, which reads the row back) through the router per `recovery_min_apply_delay` on the
# standby. Counts stale reads (must be 0) and the share of reads the standby served.
#
#   perf/causal_trials.sh [TRIALS] [WORKERS] [DELAYS...]   (defaults 100000, 16, "0 50 500")
# Environment: QP_BIN=path runs that router binary instead of building a release one.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/perf/lib.sh"
TRIALS=${1:-100000} WORKERS=${2:-16}
shift $(($# > 2 ? 2 : $#))
DELAYS=${*:-0 50 500}

if [ -n "${QP_BIN:-}" ]; then BIN=$QP_BIN; else build_router; fi
start_pg_pgbench qp-causal-trials bench 1
PORT=$(free_port)
{
    pg_split_config "$PORT" bench "$WORKERS" causal
    echo 'causal_wait = "20ms"'
} >"$BASE/router.toml"
start_router "$BASE/router.toml" "$PORT"
super() { "$PG_BIN/psql" -X -qAt -h "$PG_HOST" -p "$1" -U "$PG_SUPERUSER" -d postgres -c "$2"; }
echo "| recovery_min_apply_delay | trials | stale | reads on the standby | elapsed s |"
echo "|---|---|---|---|---|"
for delay in $DELAYS; do
    super "$PG_REPLICA_PORT" "ALTER SYSTEM SET recovery_min_apply_delay = '${delay}ms'" >/dev/null
    super "$PG_REPLICA_PORT" "SELECT pg_reload_conf()" >/dev/null
    table="trials_$delay"
    "$PG_BIN/psql" -X -q -h "$PG_HOST" -p "$PG_PRIMARY_PORT" -U "$PG_USER" -d bench -c "CREATE TABLE $table (id int PRIMARY KEY)"
    sleep $((delay / 1000 + 1)) # the standby replays the CREATE before the first trial reads it
    read -r _ n _ stale _ replica _ secs < <(/usr/bin/python3 "$ROOT/perf/causal_trials.py" "$PORT" "$PG_USER" "$PG_PASSWORD" bench "$table" "$TRIALS" "$WORKERS")
    echo "| ${delay} ms | $n | $stale | $replica ($(python3 -c "print(f'{100*$replica/$n:.1f}%')")) | $secs |"
done
