#!/usr/bin/env bash
# One device call for issue 13 (MXFP4 W4A16 decode + fused permute/combine): tests (+ memcheck), the
# W4A16 sweep up to W4_MAX_M tokens per expert (variants W4V, the first that passes is timed; the
# bench compares them), permute/combine sweep, ncu of the decode kernel, SASS counts.
# Binaries prebuilt in $BUILD (carried).  Reproduce: OUT=/tmp/out BUILD=build-moe bash kernels/moe/run_w4.sh
set -u
BUILD=${BUILD:-build-moe}; OUT=${OUT:-/tmp/w4-out}; BENCH_S=${BENCH_S:-150}
W4V=${W4V:-5,4,0}; W4_MAX_M=${W4_MAX_M:-64}; ONLY=${ONLY:-moe_ref_ceilings,moe_grouped_gemm_w4a16,moe_permute,moe_combine}
T0=$(date +%s)
mkdir -p "$OUT/tables"
LOG=$OUT/log.txt
{
  echo "== run_w4.sh commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== tests"
  timeout 200 "$BUILD/moe/test_moe" --gtest_filter="${TEST_FILTER:-MoeHost*:MoeDispatch*:AllTiles/W4A16Test*:Variants/W4A16PermuteTest*}" > "$OUT/test.txt" 2>&1
  echo "test_moe exit: $?"
  grep -E "^\[  (PASSED|FAILED)|FAILED|rel L2|Failure" "$OUT/test.txt" | grep -vE "rel L2 [0-9]\.[0-9]+e-0[3-9]" | cut -c1-200 | head -40
  echo "max rel L2 per variant:"; awk '/^w4a16 v=/{split($2,a,"="); v=a[2]; e=$NF+0; if (e>m[v]) m[v]=e; n[v]++} END{for (v in m) print "  v" v ": " n[v] " checks, max " m[v]}' "$OUT/test.txt"
  if [ "${SANITIZE:-1}" = 1 ]; then
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/moe/test_moe" \
      --gtest_filter='MoeDispatch*:AllTiles/W4A16Test.MatchesDoubleReference/*:Variants/W4A16PermuteTest.*/5' > "$OUT/memcheck.txt" 2>&1
    echo "memcheck exit: $?"; grep -E "ERROR SUMMARY" "$OUT/memcheck.txt" | head -3
    timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$BUILD/moe/test_moe" \
      --gtest_filter='MoeDispatch.PermuteCombineDecodeAndLarge' > "$OUT/racecheck.txt" 2>&1
    echo "racecheck exit: $?"; grep -E "ERROR SUMMARY|RACE" "$OUT/racecheck.txt" | head -3
  fi
  echo "== bench ($(($(date +%s)-T0)) s)"
  timeout $((BENCH_S + 60)) "$BUILD/moe/bench_moe" --out "$OUT/tables" --only "$ONLY" --deadline-s "$BENCH_S" \
    --w4-variants "$W4V" --w4-max-m "$W4_MAX_M" ${BENCH_ARGS:-}
  echo "bench exit: $?"
  if [ "${NCU:-1}" = 1 ]; then
    echo "== ncu ($(($(date +%s)-T0)) s)"
    timeout 120 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
      --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats -k regex:"w4a16|permute_fused|combine_split" -c ${NCU_COUNT:-3} \
      "$BUILD/moe/bench_moe" --out /tmp/probe --probe --w4-variants "${W4V%%,*}" > "$OUT/ncu.txt" 2>&1
    echo "ncu exit: $?"
    grep -E "w4a16|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|No Eligible|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Executed Ipc|Pipe" "$OUT/ncu.txt" | cut -c1-150 | head -60
  fi
  cuobjdump --dump-sass "$BUILD/moe/libmoe_kernels.a" 2>/dev/null | awk '/Function : /{f=($0 ~ /w4a16_decode_kernelILi8E/)} f' > "$OUT/sass_w4dec8.txt"
  echo "SASS w4a16_decode<8>: $(grep -c HGMMA "$OUT/sass_w4dec8.txt") HGMMA, $(grep -cE 'LDL|STL' "$OUT/sass_w4dec8.txt") LDL/STL, $(grep -c HMUL2 "$OUT/sass_w4dec8.txt") HMUL2, $(grep -cE 'LOP3|SHF|IMAD|IADD|PRMT|LEA' "$OUT/sass_w4dec8.txt") int ops, $(wc -l < "$OUT/sass_w4dec8.txt") lines"
  gzip -f "$OUT/sass_w4dec8.txt"
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done in $(($(date +%s)-T0)) s"
} 2>&1 | tee "$LOG"
tar -czf "$OUT/tables.tar.gz" -C "$OUT/tables" . && rm -rf "$OUT/tables"
echo "==== SUMMARY ===="
grep -E "PASSED|FAILED|max rel|v[0-9]+:|exit:|ERROR|ceiling|w4a16 .*G=|kernel variant|dispatch |SASS|done in" "$LOG" | cut -c1-200 | tail -100
