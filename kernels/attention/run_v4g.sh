#!/usr/bin/env bash
# Issue 12, sixteenth session (helper v4g): the V4 pool-stride contract (MqaArgs::pool_row_bytes,
# CompressorArgs::out_row_bytes). `bash kernels/attention/run_v4g.sh carry` (here, after building test_mqa,
# test_dsv4 and bench_attn in build-v4g) copies the binaries to the ignored build-carry/v4g; without an argument
# (device call, carry build-carry/v4g) it runs, under a global time guard GUARD (default 105 s; each phase starts
# only with room left and its timeout is clipped to what is left), in this order:
#   1. test_mqa NEW_FILTER (the new tests) and test_dsv4 V4Compressor.* (the compressor at its default 584 B);
#   2. compute-sanitizer memcheck, then synccheck, of SAN_FILTER (the unsplit V16 + default-epilogue test and
#      the compressor -> attention pipeline);
#   3. test_mqa OLD_FILTER, then OLD2_FILTER (the V4Attn tests of v4f's call 2; the two long ones last) under the
#      defaults.
# Logs: $OUT/run.log (summary) and $OUT/{new,dsv4,memcheck,synccheck,old,old2}.log. No benchmarks.
set -uo pipefail
if [ "${1:-}" = carry ]; then
  mkdir -p build-carry/v4g
  # bench_attn stays in build-v4g: with it the tree + carry exceed the call's 64 MiB (this call runs no benchmark)
  cp build-v4g/kernels/attention/test_mqa build-v4g/kernels/attention/test_dsv4 build-carry/v4g/
  git rev-parse --short HEAD > build-carry/v4g/COMMIT
  ls -la build-carry/v4g
  exit 0
fi
BIN=${BIN:-build-carry/v4g}
OUT=${OUT:-/tmp/out-v4g}
mkdir -p "$OUT"
NEW_FILTER=${NEW_FILTER:-'V4Attn.PoolRowBytesMismatchThrows:V4Attn.PoolRowBytesFollowTheForm:V4Attn.StagedEpilogueDefaultIsUnsplitLaunchesOnly:V4Attn.V16StagedEpilogueUnsplitDefault:V4Attn.V16StagedEpilogueUnsplitDefaultLong:V4Attn.CompressorToAttentionPipeline'}
SAN_FILTER=${SAN_FILTER:-'V4Attn.V16StagedEpilogueUnsplitDefault:V4Attn.CompressorToAttentionPipeline'}
OLD_FILTER=${OLD_FILTER:-'V4Attn.ProHeadsSparseWithSink:V4Attn.FlashHeadsSplitWithSink:V4Attn.WarpSpecializedStagedEpilogue:V4Attn.NoSink'}
OLD2_FILTER=${OLD2_FILTER:-'V4Attn.WarpSpecialized:V4Attn.WarpSpecializedEarlyQ'}
T0=$(date +%s)
GUARD=${GUARD:-105}
el() { echo "after $(( $(date +%s) - T0 )) s"; }
left() { echo $(( GUARD - ($(date +%s) - T0) )); }
tl() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
room() { [ "$(left)" -ge "$1" ] || { echo "$2 skipped (time guard: $(left) s left, needs $1) $(el)"; return 1; }; }
summary() { grep -E '^\[ *(PASSED|FAILED|  OK|  SKIPPED) |ERROR SUMMARY' "$1" | tr '\n' ' '; }
{
  echo "commit $(cat "$BIN/COMMIT" 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
  OK=1
  timeout $(tl 60) "$BIN/test_mqa" --gtest_filter="$NEW_FILTER" > "$OUT/new.log" 2>&1; RC=$?; [ $RC = 0 ] || OK=0
  echo "test_mqa NEW exit $RC $(el): $(summary "$OUT/new.log")"
  grep -E "attn-test\] (v4_attn out|compressor)|Failure|FAILED" "$OUT/new.log" | sed 's/\[attn-test\] *//; s/wgmma_ws_m64_tn64//; s/bound=1.0e-02//' | head -60
  timeout $(tl 30) "$BIN/test_dsv4" --gtest_filter='V4Compressor.*' > "$OUT/dsv4.log" 2>&1; RC=$?; [ $RC = 0 ] || OK=0
  echo "test_dsv4 V4Compressor.* exit $RC $(el): $(summary "$OUT/dsv4.log")"
  grep -E "attn-test\]|Failure" "$OUT/dsv4.log" | head -10
  for tool in memcheck synccheck; do
    if room 25 "$tool"; then
      timeout $(tl 60) compute-sanitizer --tool $tool --print-limit 10 "$BIN/test_mqa" --gtest_filter="$SAN_FILTER" > "$OUT/$tool.log" 2>&1
      RC=$?; [ $RC = 0 ] || OK=0
      echo "$tool $SAN_FILTER exit $RC $(el): $(summary "$OUT/$tool.log")"
      grep -E -A5 "Invalid|out of bounds|Illegal|illegal|hazard|Barrier|barrier" "$OUT/$tool.log" | head -20
    fi
  done
  for ph in old old2; do
    f=$OLD_FILTER; [ $ph = old2 ] && f=$OLD2_FILTER
    if room 10 "test_mqa $ph"; then
      timeout $(tl 120) "$BIN/test_mqa" --gtest_filter="$f" > "$OUT/$ph.log" 2>&1; RC=$?; [ $RC = 0 ] || OK=0
      echo "test_mqa $ph $f exit $RC $(el): $(summary "$OUT/$ph.log")"
      grep -E "attn-test\] v4_attn out|Failure|FAILED" "$OUT/$ph.log" | sed 's/\[attn-test\] *//; s/wgmma_ws_m64_tn64//; s/bound=1.0e-02//' | head -80
    fi
  done
  echo "tests ok: $OK $(el)"
} 2>&1 | tee "$OUT/run.log"
