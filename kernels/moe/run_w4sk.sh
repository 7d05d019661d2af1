#!/usr/bin/env bash
# One device call for issue 13's W4A16 decode variant 7 (stream-K form of variant 5): W4A16 tests
# (v0-v7, W4A16StreamK), memcheck of the variant-7 tests, ceilings + variants 5 vs 7 interleaved at the
# NOTES §8 decode shapes (bench --only w4cmp: event and graph timing, m = 1..64), ncu of v7 and v5 at
# K3 w13 G=8 m=8, SASS counts. Binaries prebuilt in $BUILD (carried).
# Reproduce: OUT=/tmp/out BUILD=build-moe bash kernels/moe/run_w4sk.sh
set -u
BUILD=${BUILD:-build-moe}; OUT=${OUT:-/tmp/w4sk-out}; BENCH_S=${BENCH_S:-200}; W4V=${W4V:-5,7}
T0=$(date +%s)
mkdir -p "$OUT/tables"
LOG=$OUT/log.txt
{
  echo "== run_w4sk.sh commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== tests"
  timeout ${TEST_S:-240} "$BUILD/kernels/moe/test_moe" --gtest_filter="${TEST_FILTER:-MoeHost*:AllTiles/W4A16Test*:Variants/W4A16PermuteTest*:W4A16StreamK*}" > "$OUT/test.txt" 2>&1
  echo "test_moe exit: $?"
  grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" "$OUT/test.txt" | cut -c1-200 | head -40
  grep -E "stream-K grid|Failure|Expected|Which is" "$OUT/test.txt" | cut -c1-200 | head -30
  echo "max rel L2 per variant:"; awk '/w4a16 v=/{for(i=1;i<=NF;i++) if ($i ~ /^v=/){split($i,a,"="); v=a[2]}; e=$NF+0; if (e>m[v]) m[v]=e; n[v]++} END{for (v in m) print "  v" v ": " n[v] " checks, max " m[v]}' "$OUT/test.txt"
  if [ "${SANITIZE:-1}" = 1 ]; then
    timeout ${MEMCHECK_S:-200} compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/kernels/moe/test_moe" \
      --gtest_filter='W4A16StreamK*:AllTiles/W4A16Test.MatchesDoubleReference/7:AllTiles/W4A16Test.MatchesDoubleReference/15:AllTiles/W4A16Test.MatchesDoubleReference/23:Variants/W4A16PermuteTest.*/7' > "$OUT/memcheck.txt" 2>&1
    echo "memcheck exit: $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | head -5
  fi
  echo "== bench ($(($(date +%s)-T0)) s)"
  timeout $((BENCH_S + 60)) "$BUILD/kernels/moe/bench_moe" --out "$OUT/tables" --only "${ONLY:-moe_ref_ceilings,w4cmp}" --deadline-s "$BENCH_S" \
    --w4-variants "$W4V" ${BENCH_ARGS:-} > "$OUT/bench.txt" 2>&1
  echo "bench exit: $?"
  grep -E "ceiling|hbm|copy" "$OUT/bench.txt" | head -5
  if [ "${NCU:-1}" = 1 ]; then
    for v in ${NCU_V:-7 5}; do
      echo "== ncu v$v ($(($(date +%s)-T0)) s)"
      timeout 120 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
        --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats --section LaunchStats -k regex:"w4a16" -c 1 \
        "$BUILD/kernels/moe/bench_moe" --out /tmp/probe --probe --w4-variants "$v" > "$OUT/ncu_v$v.txt" 2>&1
      echo "ncu exit: $?"
      grep -E "w4a16|Duration|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|No Eligible|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Executed Ipc|Grid Size|Executed Instructions  " "$OUT/ncu_v$v.txt" | cut -c1-150 | head -24
    done
  fi
  for k in w4a16_streamk_kernelILi8E w4a16_decode_kernelILi8ELi2E w4a16_streamk_kernelILi16E; do
    cuobjdump --dump-sass "$BUILD/kernels/moe/libmoe_kernels.a" 2>/dev/null | awk -v pat="$k" '/Function : /{f=($0 ~ pat)} f' > "$OUT/sass_$k.txt"
    echo "SASS $k: $(grep -c HGMMA "$OUT/sass_$k.txt") HGMMA, $(grep -cE 'LDL|STL' "$OUT/sass_$k.txt") LDL/STL, $(grep -c HMUL2 "$OUT/sass_$k.txt") HMUL2, $(wc -l < "$OUT/sass_$k.txt") lines"
  done
  tar -czf "$OUT/sass.tar.gz" -C "$OUT" $(cd "$OUT" && ls sass_*.txt) && rm -f "$OUT"/sass_*.txt
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done in $(($(date +%s)-T0)) s"
} 2>&1 | tee "$LOG"
tar -czf "$OUT/tables.tar.gz" -C "$OUT/tables" . && rm -rf "$OUT/tables"
gzip -f "$OUT/memcheck.txt" 2>/dev/null
echo "==== SUMMARY ===="
grep -E "^w4cmp .*(median|m=[0-9]+:)" "$OUT/bench.txt" | grep -E "median| m=(1|4|8|16|32|64):" | cut -c1-230
