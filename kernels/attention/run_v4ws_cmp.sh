#!/usr/bin/env bash
# Issue 12, seventh session: same-run comparison of environment settings of the V4 warp-specialised
# kernel (e.g. CMP_ENV="V4WS_REG=0 V4WS_REG=1"), interleaved REPS times, after test_mqa V4Attn.* and a
# memcheck of V4Attn.WarpSpecialized under each setting. Points: PTS (H:B:L, bench_attn --v4-attn-point).
# Usage: BUILD=build-attn CMP_ENV="V4WS_REG=0 V4WS_REG=1" bash kernels/attention/run_v4ws_cmp.sh
set -uo pipefail
BIN=${BUILD:-build-attn}/kernels/attention
OUT=${OUT:-/tmp/out-attn}
W=$(mktemp -d); mkdir -p "$OUT"
PTS=${PTS:-128:512:65536,128:128:65536,128:32:65536,64:512:65536,64:128:65536,128:512:1048576,128:64:131072,128:4096:65536}
T0=$(date +%s)
{
  for e in $CMP_ENV; do
    env $e timeout 150 "$BIN/test_mqa" --gtest_filter="V4Attn.*" > "$W/test_$e.log" 2>&1
    echo "$e test_mqa exit $? after $(( $(date +%s) - T0 )) s: $(grep -E 'PASSED|FAILED' "$W/test_$e.log" | tr '\n' ' ')"
    grep -E "mode=[034]" "$W/test_$e.log" | sed 's/.*rel_l2=/rel_l2=/' | tr '\n' ' '; echo
    env $e timeout 120 compute-sanitizer --tool memcheck "$BIN/test_mqa" --gtest_filter="V4Attn.WarpSpecialized" > "$W/memcheck_$e.log" 2>&1
    echo "$e memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck_$e.log")"
  done
  for rep in $(seq 1 ${REPS:-2}); do
    for e in $CMP_ENV; do
      env $e timeout -k 5 150 "$BIN/bench_attn" --out "$W/cmp_${e}_r$rep" --only csa_sparse_attn_decode,hca_attn_decode,csa_sparse_attn_prefill \
        --v4-attn-variant 3 --v4-attn-point "$PTS" --budget 140 --share-scale 3 > "$W/cmp_${e}_r$rep.log" 2>&1
      echo "$e rep $rep exit $? after $(( $(date +%s) - T0 )) s"
      grep -E "^  (csa|hca)" "$W/cmp_${e}_r$rep.log" | awk '{printf "  %-24s %-28s %s %s\n", $1, $2, substr($0, index($0,"{"), 60), $(NF-7)}'
    done
  done
  echo "total $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/cmp.tar.gz" -C "$W" . 2>/dev/null || true
