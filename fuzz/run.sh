#!/usr/bin/env bash
# Runs every fuzz target (or those named) for SECONDS each, one worker, under the issue's limits
# (1 s per input, 256 MB). Usage: fuzz/run.sh BUILD_DIR SECONDS [target...]
# RUNS=N in the environment stops each target after N executions (a 10^6 campaign:
# RUNS=1000000 fuzz/run.sh build-fuzz 3600 mooncake); SECONDS still caps the time.
# Prints "target execs exec/s" per target; exit 1 if any target found something (crash-* files in
# BUILD_DIR/findings/<target>/).
# FORK=1 runs libFuzzer in fork mode with -ignore_timeouts=1, for long campaigns on a loaded machine:
# a load spike that stretches one input past 1 s of wall time no longer ends the campaign. Every
# timeout-* input this campaign wrote is then re-run alone under the same 1 s limit; one that still
# times out (or fails) is a finding (exit 1).
# Crashes and out-of-memory still stop the campaign. NICE=N sets the niceness (default 19).
set -uo pipefail
cd "$(dirname "$0")/.."
build=$1 secs=$2; shift 2
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(mooncake azure burstgpt tracelab_replay tracelab_rounds scenario model hardware cli)
status=0
for t in "${targets[@]}"; do
  [ -x "$build/fuzz_$t" ] || { echo "$t: not built (a target named but not built is a failure, not a skip)"; status=1; continue; }
  work="$build/corpus/$t"; found="$build/findings/$t"
  mkdir -p "$work" "$found"
  log="$build/fuzz_$t.log"
  [ -f "$log" ] && mv "$log" "$log.prev"   # the previous campaign's log stays beside this one
  stamp="$found/.campaign-start"; touch "$stamp"
  # ASan keeps freed memory in a quarantine (256 MB by default), which alone would push a target
  # that frees large buffers past -rss_limit_mb=256; 32 MB keeps the RSS limit about retained memory
  fork=()
  [ "${FORK:-0}" = 1 ] && fork=(-fork=1 -ignore_timeouts=1 -ignore_ooms=0 -ignore_crashes=0)
  # timeout: a libFuzzer timeout handler that fires inside ASan's allocator can deadlock (it
  # allocates); in fork mode the parent would then wait for that job forever
  ASAN_OPTIONS="quarantine_size_mb=32${ASAN_OPTIONS:+:$ASAN_OPTIONS}" timeout -k 10 $((secs + 600)) nice -n "${NICE:-19}" "$build/fuzz_$t" "$work" "fuzz/corpus/$t" -dict="fuzz/dict/$t.dict" -max_total_time="$secs" \
    -timeout=1 -rss_limit_mb=256 -malloc_limit_mb=256 -max_len=8192 -artifact_prefix="$found/" -print_final_stats=1 ${RUNS:+-runs="$RUNS"} "${fork[@]}" >"$log" 2>&1
  rc=$?
  if [ ${#fork[@]} -gt 0 ]; then
    # fork mode prints "#N: cov: .. exec/s R oom/timeout/crash: a/b/c time: Ss" per job; R is the
    # last job's rate, so the campaign's is N / S
    last=$(grep -E '^#[0-9]+: cov' "$log" | tail -1)
    execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")
    took=$(grep -oE 'time: [0-9]+s' <<<"$last" | grep -oE '[0-9]+')
    rate=$(awk -v n="${execs:-0}" -v s="${took:-0}" 'BEGIN { if (s > 0) printf "%d", n / s; else print "?" }')
    slow=0
    # this campaign's timeouts only, each re-run alone under the same 1 s limit (its exit status
    # is the verdict; the wall time printed includes the process start and ASan's set-up)
    while IFS= read -r f; do
      t0=$(date +%s.%N)
      ASAN_OPTIONS="quarantine_size_mb=32${ASAN_OPTIONS:+:$ASAN_OPTIONS}" timeout -k 5 60 "$build/fuzz_$t" -timeout=1 -rss_limit_mb=256 \
        -malloc_limit_mb=256 -artifact_prefix="$found/rerun-" "$f" >/dev/null 2>&1
      r=$?
      dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
      echo "  re-run of $(basename "$f"): exit $r, ${dt} s with the process start"
      [ $r -ne 0 ] && slow=1
    done < <(find "$found" -maxdepth 1 -name 'timeout-*' -newer "$stamp")
    [ $slow -eq 1 ] && rc=1
    echo "$t execs=${execs:-?} exec/s=${rate:-?} timeouts-under-load=$(grep -oE 'oom/timeout/crash: [0-9/]+' <<<"$last") rc=$rc"
  else
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
    echo "$t execs=${execs:-?} exec/s=${rate:-?} rc=$rc"
  fi
  if [ $rc -ne 0 ]; then status=1; grep -m3 -E 'FINDING|ERROR: |runtime error|terminate' "$log"; ls "$found"; fi
done
exit $status
