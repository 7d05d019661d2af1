#!/usr/bin/env bash
# Issue 12, seventeenth session (helper tf): the reviewer's test findings on the V4 top-k filter and the ST + V16
# staged producer, one device call.
# `bash kernels/attention/run_tf.sh carry` (here, after building test_dsv4 in build-v4g and test_mqa in build-v4f)
# copies both binaries, stripped and gzipped, to the ignored build-carry/tf; without an argument (device call, carry
# build-carry/tf) it runs, under a global time guard GUARD (default 240 s; every job's timeout is clipped to it),
# these jobs AT ONCE (correctness only, no timing is taken, so they share the GPU; the CPU references dominate):
#   dsv4      test_dsv4 V4TopK.*:V4Indexer.*:V4Compressor.*, then racecheck of V4TopK.FilterSmallForSanitizers;
#   mc_topk   compute-sanitizer memcheck of the new / changed top-k tests (TOPK_SAN);
#   san_attn  memcheck, then synccheck, of the ST + V16 + staged-epilogue cases (ATTN_SAN);
#   mqa_<i>   the FULL test_mqa in SHARDS gtest shards (GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX).
# Out: $OUT/run.log (summary: exit codes, gtest verdicts, sanitizer ERROR SUMMARY lines, failures) and $OUT/logs.tar.gz.
set -uo pipefail
if [ "${1:-}" = carry ]; then
  mkdir -p build-carry/tf
  cp build-v4g/kernels/attention/test_dsv4 build-v4f/kernels/attention/test_mqa build-carry/tf/
  strip --strip-unneeded build-carry/tf/test_dsv4 build-carry/tf/test_mqa
  gzip -f -6 build-carry/tf/test_dsv4 build-carry/tf/test_mqa
  git rev-parse --short HEAD > build-carry/tf/COMMIT
  ls -la build-carry/tf
  exit 0
fi
BIN=${BIN:-build-carry/tf}
OUT=${OUT:-/tmp/out-tf}
W=$(mktemp -d); mkdir -p "$OUT"
for b in test_dsv4 test_mqa; do gzip -dc "$BIN/$b.gz" > "$W/$b" && chmod +x "$W/$b"; done
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-$(cat "$BIN/COMMIT" 2>/dev/null || echo unknown)}
TOPK_SAN=${TOPK_SAN:-'V4TopK.FilterLongRowsClusters:V4TopK.FilterClusterSizes:V4TopK.FilterRowsLongerThanMaxLen:V4TopK.FilterSmallForSanitizers'}
ATTN_SAN=${ATTN_SAN:-'V4Attn.WarpSpecializedStaged16BUnsplitEpilogue'}
SHARDS=${SHARDS:-6}
GUARD=${GUARD:-240}
T0=$(date +%s)
el() { echo "after $(( $(date +%s) - T0 )) s"; }
tl() { local l=$(( GUARD - ($(date +%s) - T0) )); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
summary() { grep -E '^\[ *(PASSED|FAILED) |ERROR SUMMARY|^\[  FAILED  \]' "$1" | sort -u | tr '\n' ' '; }
job() {  # name, timeout, command...
  local n=$1 t=$2; shift 2
  timeout -k 5 "$(tl "$t")" "$@" > "$W/$n.log" 2>&1
  echo "$n exit $? $(el): $(summary "$W/$n.log")" >> "$W/summary.txt"
}
{
  echo "commit $SERVESIM_COMMIT"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
  ( job dsv4 90 "$W/test_dsv4" --gtest_filter='V4TopK.*:V4Indexer.*:V4Compressor.*'
    job racecheck_topk 120 compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 10 "$W/test_dsv4" \
      --gtest_filter=V4TopK.FilterSmallForSanitizers ) &
  job mc_topk 200 compute-sanitizer --tool memcheck --print-limit 10 "$W/test_dsv4" --gtest_filter="$TOPK_SAN" &
  ( job mc_attn 120 compute-sanitizer --tool memcheck --print-limit 10 "$W/test_mqa" --gtest_filter="$ATTN_SAN"
    job sc_attn 120 compute-sanitizer --tool synccheck --print-limit 10 "$W/test_mqa" --gtest_filter="$ATTN_SAN" ) &
  for i in $(seq 0 $((SHARDS - 1))); do
    GTEST_TOTAL_SHARDS=$SHARDS GTEST_SHARD_INDEX=$i job "mqa_$i" 230 "$W/test_mqa" &
  done
  wait
  sort "$W/summary.txt"
  echo "--- tests run / passed / failed over the test_mqa shards:"
  cat "$W"/mqa_*.log | grep -cE '^\[ RUN      \]'
  cat "$W"/mqa_*.log | grep -cE '^\[       OK \]'
  cat "$W"/mqa_*.log | grep -E '^\[  FAILED  \] [A-Za-z0-9_]+\.[A-Za-z0-9_]+ \(' || echo "no failed test"
  echo "--- failures and sanitizer reports:"
  grep -h -B2 -A8 -E 'Failure$|Invalid|out of bounds|Illegal|illegal|hazard|Barrier error|divergent' "$W"/*.log | head -80
  echo "--- the ST + V16 + EP cases and the top-k filter cases:"
  grep -h -E 'unsplit\]|filter-(past|cs|small)' "$W/mqa_"*.log "$W/dsv4.log" | sed 's/\[attn-test\] *//; s/wgmma_ws_m64_tn64//' | head -60
  grep -h -E '^\[       OK \]' "$W"/*.log | sort -t'(' -k2 -n | tail -12
  echo "done $(el)"
} > "$OUT/run.log" 2>&1
tar czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls *.log summary.txt)
cat "$OUT/run.log"
