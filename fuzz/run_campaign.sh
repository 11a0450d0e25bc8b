#!/usr/bin/env bash
# Runs every fuzz target one after another for MAX_TIME seconds each (default 150) and prints
# one summary line per target: executions, coverage (cov = edges, ft = features), corpus size,
# slowest input and whether it crashed. Logs go to $LOG_DIR (default fuzz/logs, not committed).
#
#   fuzz/run_campaign.sh                    # the bounded run recorded in fuzz/README.md
#   MAX_TIME=1800 fuzz/run_campaign.sh      # the issue's 30 minutes per target
#   RUNS=10000000 MAX_TIME=0 fuzz/run_campaign.sh   # the issue's 10 million executions each
#   TARGETS="sql_lexer config_parse" fuzz/run_campaign.sh
#   TARGETS="pg_exchange mysql_exchange" RUNS=10000000 MAX_TIME=0 SANITIZER=none fuzz/run_campaign.sh
#                                           # the two session exchanges (#37), as recorded in README.md
#   SANITIZER=none fuzz/run_campaign.sh     # no ASan: 2-3x the executions; the decoders are safe
#                                           # Rust, so ASan watches only std and the fuzzer
#   TIMEOUT=1 fuzz/run_campaign.sh          # an input slower than this many seconds is a finding
#
# Builds always enable debug assertions (-a), so an integer overflow is a finding, not a wrap.
# Only a stable toolchain is needed: RUSTC_BOOTSTRAP=1 lets it accept -Zsanitizer=address.
set -u
cd "$(dirname "$0")"
MAX_TIME=${MAX_TIME:-150}
RUNS=${RUNS:--1}
LOG_DIR=${LOG_DIR:-logs}
SANITIZER=${SANITIZER:-address}
TIMEOUT=${TIMEOUT:-10}
mkdir -p "$LOG_DIR"
export RUSTC_BOOTSTRAP=1
cargo fuzz build -O -a -s "$SANITIZER" >/dev/null 2>&1 || { echo "build failed: run 'RUSTC_BOOTSTRAP=1 cargo fuzz build -O -a -s $SANITIZER'"; exit 1; }
for t in ${TARGETS:-$(cargo fuzz list)}; do
    mkdir -p "corpus/$t" "artifacts/$t"
    cargo fuzz run -O -a -s "$SANITIZER" "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$MAX_TIME" -runs="$RUNS" -rss_limit_mb=2048 -timeout="$TIMEOUT" -print_final_stats=1 \
        >"$LOG_DIR/$t.log" 2>&1
    rc=$?
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$LOG_DIR/$t.log" | grep -oE '[0-9]+$')
    last=$(grep -E '^#[0-9]+' "$LOG_DIR/$t.log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+')
    ft=$(grep -oE 'ft: [0-9]+' <<<"$last" | grep -oE '[0-9]+')
    slow=$(grep -oE 'stat::slowest_unit_time_sec: *[0-9]+' "$LOG_DIR/$t.log" | grep -oE '[0-9]+$')
    files=$(find "corpus/$t" -type f | wc -l)
    crash=$(ls "artifacts/$t" 2>/dev/null | tr '\n' ' ')
    echo "$t runs=${runs:-?} cov=${cov:-?} ft=${ft:-?} corpus=$files slowest_s=${slow:-?} exit=$rc artifacts=[${crash}]"
done
