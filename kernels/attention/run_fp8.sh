#!/usr/bin/env bash
# Issue 12 device call for the FP8-KV MLA decode kernel (mla_fp8.cu), one nvidia-h200 call:
# test_mla_fp8 (+ the BF16 wgmma MLA tests as a regression check), compute-sanitizer memcheck of
# test_mla_fp8, SASS counts of the kernel, BF16 vs FP8 at the NOTES' reference points in the same
# run, then -- only if test_mla_fp8 passed -- the mla_decode_fp8kv sweep (the mla_decode grid) and
# ncu counters at a few points.
# Usage (repository root; binaries in $BUILD/kernels/attention, built here and carried):
#   BUILD=build-attn SERVESIM_COMMIT=<sha> FP8_S=150 [QUICK=1] [COMPARE_POINTS=B:H:L,...] \
#     [NCU_POINTS="512:64:4096 512:128:4096"] [MEMCHECK=0] [COMPARE_OPS="mla_decode_fp8kv"] \
#     [FP8_VARIANTS="4 6"] [SWEEP_VARIANT=6] [NCU_SOURCE=1] [MEMCHECK_FILTER=MlaFp8Decode.Variant6*] bash kernels/attention/run_fp8.sh
# FP8_VARIANTS: the FP8 kernel variants timed at the compare points (bench_attn --mla-fp8-variant);
# SWEEP_VARIANT / the first of FP8_VARIANTS: the sweep's and ncu's kernel; NCU_SOURCE=1: also a full
# ncu report with per-SASS-instruction stall samples at the first NCU point (source page as CSV).
# -> $OUT/run.log, $OUT/tables.tar.gz (mla_decode_fp8kv.json, compare tables), $OUT/logs.tar.gz
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/ncu_fp8_full.sh"
BUILD=${BUILD:-build-attn}
OUT=${OUT:-/tmp/out-attn}
BIN=$BUILD/kernels/attention
W=${WORK:-$(mktemp -d)}  # WORK: a fixed folder, so a caller can pack what a killed run left
mkdir -p "$W/tables" "$OUT"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
T0=$(date +%s)
FV=${FP8_VARIANTS:-4}
SV=${SWEEP_VARIANT:-${FV%% *}}
Q=""
[ -n "${QUICK:-}" ] && Q="--quick"
CP=${COMPARE_POINTS:-256:128:2048,16:128:65536,512:128:4096,512:64:4096,128:64:32768,64:48:32768,64:32:32768,64:24:32768,64:16:32768,64:12:32768,512:96:4096,1:128:65536}
{
  echo "commit $SERVESIM_COMMIT"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
  echo "=== test_mla_fp8"
  timeout ${TEST_TIMEOUT:-120} "$BIN/test_mla_fp8" > "$W/test_mla_fp8.log" 2>&1
  RC=$?
  grep -E "attn-test|OK \]|FAILED|PASSED|Failure|Expected|Which is|error" "$W/test_mla_fp8.log"
  echo "test_mla_fp8 exit $RC after $(( $(date +%s) - T0 )) s"
  timeout 120 "$BIN/test_mqa" --gtest_filter=MlaDecode.WgmmaHeadCountsAndTails > "$W/test_mqa.log" 2>&1
  echo "test_mqa (MlaDecode.WgmmaHeadCountsAndTails) exit $?: $(grep -cE 'attn-test' "$W/test_mqa.log") checks"
  if [ "$RC" = 0 ] && [ "${MEMCHECK:-1}" != 0 ] && command -v compute-sanitizer > /dev/null; then
    timeout 200 compute-sanitizer --tool memcheck --print-limit 20 "$BIN/test_mla_fp8" --gtest_filter="${MEMCHECK_FILTER:-*}" > "$W/memcheck.log" 2>&1
    echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tr '\n' ' ')"
    grep -E "Invalid|out of bounds|FAILED" "$W/memcheck.log" | head -5
    echo "memcheck done after $(( $(date +%s) - T0 )) s"
  fi
  if command -v cuobjdump > /dev/null; then
    cuobjdump -sass "$BIN/test_mla_fp8" > "$W/sass_all.txt"
    for k in ILb0E ILb1E; do  # variant 4 / variant 6 instantiations
      awk -v k="$k" '$0 ~ "Function : .*mla_decode_fp8_kernel" && $0 ~ k {f=1;next} /Function :/{f=0} f' "$W/sass_all.txt" > "$W/sass_fp8_$k.sass"
      echo "--- SASS mla_decode_fp8_kernel $k: $(grep -cE '^ +/\*[0-9a-f]+\*/' "$W/sass_fp8_$k.sass") instructions"
      grep -oE "\b(HGMMA\.[0-9x]+[^ ]*|LDG[^ ]*|STS[^ ]*|LDS[^ ]*|LDL[^ ]*|STL[^ ]*|F2FP[^ ]*|HMUL2[^ ]*|HADD2[^ ]*|FMUL|PRMT|BAR[^ ;]*|WARPGROUP[^ ;]*|UBLKPF[^ ;]*|CCTL[^ ;]*)" "$W/sass_fp8_$k.sass" |
        sort | uniq -c | sort -rn | head -30 | tr '\n' ';'
      echo
    done
    rm -f "$W/sass_all.txt"
  fi
  if [ "$RC" = 0 ]; then
    mkdir -p "$W/tables/compare"
    for op in ${COMPARE_OPS:-mla_decode mla_decode_fp8kv}; do
      for v in $( [ "$op" = mla_decode_fp8kv ] && echo $FV $FV || echo 0 ); do  # FP8 variants twice, interleaved
        timeout 150 "$BIN/bench_attn" --out "$W/cmp_${op}_$v" --only $op --budget 100 --share-scale 2 --mla-fp8-variant $v \
          --mla-decode-point "$CP" > "$W/compare_${op}_$v.log" 2>&1
        echo "compare $op variant $v exit $?"; grep -E "^  mla_decode" "$W/compare_${op}_$v.log" | cut -c1-190
        cp "$W/cmp_${op}_$v/$op.json" "$W/tables/compare/${op}_v${v}_points.json" 2>/dev/null
      done
    done
  fi
  if [ "$RC" = 0 ] && [ "${FP8_S:-150}" != 0 ]; then
    echo "=== mla_decode_fp8kv sweep (${FP8_S:-150} s) after $(( $(date +%s) - T0 )) s"
    echo "sweep variant $SV"
    timeout -k 5 $(( ${FP8_S:-150} + 40 )) "$BIN/bench_attn" --out "$W/tables" --only mla_decode_fp8kv --mla-fp8-variant $SV \
      --budget $(( ${FP8_S:-150} + 10 )) --share-scale $(awk "BEGIN{print ${FP8_S:-150} / 70}") $Q \
      > "$W/bench_fp8.log" 2>&1
    echo "bench exit $? after $(( $(date +%s) - T0 )) s"
    grep -E "^== |ratio|mla_decode_fp8kv " "$W/bench_fp8.log" | grep -v "^  mla_decode" | head -40
  fi
  if [ "$RC" = 0 ] && [ -n "${NCU_POINTS:-}" ] && [ -z "${NCU_SOURCE:-}" ] && command -v ncu > /dev/null; then
    for pt in $NCU_POINTS; do
      f=$W/ncu_fp8_$(echo "$pt" | tr ':' '_').log
      timeout 100 ncu --clock-control none -k regex:mla_decode_fp8 -c 1 --section SpeedOfLight \
        --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,regex:sm__pipe_tensor_op.*cycles_active.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_issue_stalled_barrier,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct,smsp__issue_active.avg.pct_of_peak_sustained_active \
        "$BIN/bench_attn" --out "$W/ncu_tables" --only mla_decode_fp8kv --mla-fp8-variant $SV --budget 40 --mla-decode-point "$pt" > "$f" 2>&1
      echo "=== ncu $pt exit $?"
      grep -E "dram__|lts__t_sector_hit|gpu__time|pipe_tensor|stalled|issue_active|DRAM Throughput|Memory Throughput|Compute \(SM\)|Duration|==ERR" "$f" | head -20
    done
  fi
  if [ "$RC" = 0 ] && [ -n "${NCU_SOURCE:-}" ] && [ -n "${NCU_POINTS:-}" ] && command -v ncu > /dev/null; then
    pt=${NCU_POINTS%% *}
    for v in $FV; do
      ncu_fp8_full "$BIN" "$W" "$v" "$pt"
    done
  fi
  echo "=== summary"
  sed -n '/==== summary/,$p' "$W/bench_fp8.log" 2>/dev/null
  echo "total $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/tables.tar.gz" -C "$W" tables
tar czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls *.log *.txt *.sass *.csv 2>/dev/null)
