#!/usr/bin/env bash
# Runs every fuzz target (or those named) for SECONDS each, one worker, under the issue's limits
# (1 s per input, 256 MB). Usage: fuzz/run.sh BUILD_DIR SECONDS [target...]
# RUNS=N in the environment stops each target after N executions (a 10^6 campaign:
# RUNS=1000000 fuzz/run.sh build-fuzz 3600 mooncake); SECONDS still caps the time.
# Prints "target execs exec/s" per target; exit 1 if any target found something (crash-* files in
# BUILD_DIR/findings/<target>/).
set -uo pipefail
cd "$(dirname "$0")/.."
build=$1 secs=$2; shift 2
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(mooncake azure burstgpt tracelab_replay tracelab_rounds scenario model hardware cli)
status=0
for t in "${targets[@]}"; do
  [ -x "$build/fuzz_$t" ] || { echo "$t: not built"; continue; }
  work="$build/corpus/$t"; found="$build/findings/$t"
  mkdir -p "$work" "$found"
  log="$build/fuzz_$t.log"
  # ASan keeps freed memory in a quarantine (256 MB by default), which alone would push a target
  # that frees large buffers past -rss_limit_mb=256; 32 MB keeps the RSS limit about retained memory
  ASAN_OPTIONS="quarantine_size_mb=32${ASAN_OPTIONS:+:$ASAN_OPTIONS}" nice -n 19 "$build/fuzz_$t" "$work" "fuzz/corpus/$t" -dict="fuzz/dict/$t.dict" -max_total_time="$secs" \
    -timeout=1 -rss_limit_mb=256 -malloc_limit_mb=256 -max_len=8192 -artifact_prefix="$found/" -print_final_stats=1 ${RUNS:+-runs="$RUNS"} >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
  echo "$t execs=${execs:-?} exec/s=${rate:-?} rc=$rc"
  if [ $rc -ne 0 ]; then status=1; grep -m3 -E 'FINDING|ERROR: |runtime error|terminate' "$log"; ls "$found"; fi
done
exit $status
