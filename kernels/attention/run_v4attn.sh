#!/usr/bin/env bash
# Issue 12 device call for the V4 attention wgmma kernel: test_mqa V4Attn.* (CPU double reference),
# memcheck of the new kernel's test, SASS counts, then -- only if the tests passed -- bench_attn
# csa_sparse_attn_decode / hca_attn_decode at H >= 64 (V4_ATTN_MIN_HEADS=64) and a few legacy points.
# Usage: BUILD=build-attn SERVESIM_COMMIT=<sha> CSA_S=25 HCA_S=35 bash kernels/attention/run_v4attn.sh
set -uo pipefail
BUILD=${BUILD:-build-attn}
OUT=${OUT:-/tmp/out-attn}
BIN=$BUILD/kernels/attention
W=$(mktemp -d)
mkdir -p "$W/tables" "$OUT"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
T0=$(date +%s)
{
  echo "commit $SERVESIM_COMMIT"
  timeout 120 "$BIN/test_mqa" --gtest_filter="V4Attn.*" > "$W/test_mqa.log" 2>&1
  RC=$?
  grep -E "attn-test|OK \]|FAILED|PASSED|Failure|Expected|Which is|error" "$W/test_mqa.log" | head -40
  echo "test_mqa exit $RC after $(( $(date +%s) - T0 )) s"
  timeout 90 compute-sanitizer --tool memcheck --print-limit 10 "$BIN/test_mqa" --gtest_filter="V4Attn.WgmmaOwnPlanAndLegacy" > "$W/memcheck.log" 2>&1
  echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tr '\n' ' ')"
  grep -E -A5 "Invalid|out of bounds|Illegal|illegal" "$W/memcheck.log" | head -20
  cuobjdump -sass "$BIN/test_mqa" | awk '/Function : .*v4_attn_wgmma/{f=1;next} /Function :/{f=0} f' |
    grep -oE "\b(HGMMA\.[0-9x]+[^ ]*|LDL[^ ]*|STL[^ ]*|LDGSTS[^ ]*)" | sort | uniq -c
  if [ "$RC" = 0 ]; then
    V4_ATTN_MIN_HEADS=64 timeout -k 5 $(( ${CSA_S:-25} + 30 )) "$BIN/bench_attn" --out "$W/tables" --only csa_sparse_attn_decode \
      --budget $(( ${CSA_S:-25} + 5 )) --share-scale $(awk "BEGIN{print ${CSA_S:-25} / 26}") > "$W/bench_csa.log" 2>&1
    echo "csa bench exit $? after $(( $(date +%s) - T0 )) s"; grep -E "^== " "$W/bench_csa.log"
    V4_ATTN_MIN_HEADS=64 timeout -k 5 $(( ${HCA_S:-35} + 30 )) "$BIN/bench_attn" --out "$W/tables" --only hca_attn_decode \
      --budget $(( ${HCA_S:-35} + 5 )) --share-scale $(awk "BEGIN{print ${HCA_S:-35} / 20}") > "$W/bench_hca.log" 2>&1
    echo "hca bench exit $? after $(( $(date +%s) - T0 )) s"; grep -E "^== " "$W/bench_hca.log"
    grep -E "pro_h128|flash_h64" "$W/bench_csa.log" | grep -E "\"batch\":(32|128|512)," | grep -E "\"ctx\":(65536|1048576)" | cut -c1-220 | head -12
  else
    tail -40 "$W/test_mqa.log"
  fi
  echo "total $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/tables.tar.gz" -C "$W" tables
tar czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls *.log 2>/dev/null)
