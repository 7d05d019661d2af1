#!/usr/bin/env bash
# One device call for issue 13's W4A16 PREFILL variant 8 (dequantisation warpgroup + SS wgmma, NOTES.md §13):
# W4A16 tests (v0-v8, W4A16Prefill at K3/DSV4 K with skewed loads), memcheck of the v8 tests, then
# `bench_moe --only moe_ref_ceilings,w4pf` (variants W4V interleaved with cuBLAS dense bf16 at the same FLOPs,
# G = 8, m = 512..4096), ncu of both variants at K3 w13 G=8 m=1024 (bench --probe), SASS counts; optional
# (TABLE=1, only when the tests passed) the moe_grouped_gemm_w4a16 sweep of variant TABLE_V at m >= 96.
# Binaries prebuilt in $BIN (carried).  Reproduce: OUT=/tmp/out BIN=.w4pfbin bash kernels/moe/run_w4pf.sh
set -u
BIN=${BIN:-.w4pfbin}; OUT=${OUT:-/tmp/w4pf-out}; W4V=${W4V:-0,8}
T0=$(date +%s)
LOG=$OUT/log.txt
mkdir -p "$OUT"
{
  echo "== run_w4pf.sh commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  TESTS_OK=1
  if [ "${TESTS:-1}" = 1 ]; then
    echo "== tests"
    timeout ${TEST_S:-180} "$BIN/test_moe" --gtest_filter="${TEST_FILTER:-MoeHost*:AllTiles/W4A16Test*:Variants/W4A16PermuteTest*:W4A16Prefill*}" > "$OUT/test.txt" 2>&1
    rc=$?; echo "test_moe exit: $rc"; [ $rc = 0 ] || TESTS_OK=0
    grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" "$OUT/test.txt" | cut -c1-200 | head -30
    echo "max rel L2 per variant:"; awk '/^w4a16 v=/{split($2,a,"="); v=a[2]; e=$NF+0; if (e>m[v]) m[v]=e; n[v]++} END{for (v in m) print "  v" v ": " n[v] " checks, max " m[v]}' "$OUT/test.txt"
    grep -E "^w4a16 v=8 bt=(128|256)" "$OUT/test.txt" | head -12
  fi
  if [ $TESTS_OK = 0 ]; then  # a failing / hanging variant is not timed or profiled
    if [ "${STOP_ON_FAIL:-0}" = 1 ]; then echo "tests failed: stopping"; SANITIZE=0; PF=0; NCU=0; TABLE=0
    else echo "tests failed: timing and profiling variant 0 only"; W4V=0; NCU_V=0; SANITIZE=${SANITIZE_ON_FAIL:-1}; fi
  fi
  if [ "${SANITIZE:-1}" = 1 ]; then
    timeout ${MEMCHECK_S:-150} compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_moe" \
      --gtest_filter="${MEMCHECK_FILTER:-W4A16Prefill*:AllTiles/W4A16Test.MatchesDoubleReference/44:AllTiles/W4A16Test.MatchesDoubleReference/53}" > "$OUT/memcheck.txt" 2>&1
    rc=$?; echo "memcheck exit: $rc"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | head -5
    grep -E "^w4a16 v=" "$OUT/memcheck.txt" | head -8
    if [ $rc != 0 ]; then TESTS_OK=0; [ "${STOP_ON_FAIL:-0}" = 1 ] && { PF=0; NCU=0; TABLE=0; }; fi
  fi
  echo "== bench ($(($(date +%s)-T0)) s)"
  if [ "${PF:-1}" = 1 ]; then
    timeout ${BENCH_S:-200} "$BIN/bench_moe" --out "$OUT/tables_pf" --only "moe_ref_ceilings,w4pf" --deadline-s $((${BENCH_S:-200} - 30)) \
      --w4-variants "$W4V" ${PF_ARGS:-} > "$OUT/bench_pf.txt" 2>&1
    echo "bench w4pf exit: $?"
    grep -E "ceiling|copy|cublas bf16" "$OUT/bench_pf.txt" | head -4
  fi
  if [ "${NCU:-1}" = 1 ]; then
    for v in ${NCU_V:-0 8}; do
      echo "== ncu v$v ($(($(date +%s)-T0)) s)"
      timeout ${NCU_S:-120} ncu --clock-control none ${NCU_SECTIONS:---section SpeedOfLight --section WarpStateStats --section Occupancy \
        --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats --section LaunchStats \
        --section MemoryWorkloadAnalysis} --kernel-name-base demangled -k regex:"w4a16_kernel<\(int\)256|w4a16_prefill_kernel<\(int\)256" -c 1 \
        "$BIN/bench_moe" --out /tmp/probe --probe --w4-variants "$v" > "$OUT/ncu_v$v.txt" 2>&1
      echo "ncu exit: $?"
      grep -E "w4a16|Duration|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|No Eligible|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Executed Ipc|Executed Instructions  |Shared Memory|Tensor|Pipe" "$OUT/ncu_v$v.txt" | cut -c1-150 | head -30
    done
  fi
  for k in w4a16_kernelILi256ELi0ELi1E w4a16_prefill_kernelILi256E; do
    cuobjdump --dump-sass "$BIN/bench_moe" 2>/dev/null | awk -v pat="$k" '/Function : /{f=($0 ~ pat)} f' > "$OUT/sass_$k.txt"
    echo "SASS $k: $(grep -c HGMMA "$OUT/sass_$k.txt") HGMMA, $(grep -cE 'LDL|STL' "$OUT/sass_$k.txt") LDL/STL, $(grep -c HMUL2 "$OUT/sass_$k.txt") HMUL2, $(grep -c STSM "$OUT/sass_$k.txt") STSM, $(grep -cE 'LOP3|SHF|IMAD.SHL' "$OUT/sass_$k.txt") LOP3/SHF/IMAD.SHL, $(wc -l < "$OUT/sass_$k.txt") lines"
  done
  if [ "${TABLE:-0}" = 1 ] && [ $TESTS_OK = 1 ]; then
    echo "== table sweep v${TABLE_V:-8} ($(($(date +%s)-T0)) s)"
    TABLE_S=${TABLE_S:-$(( ${TOTAL_S:-400} - ($(date +%s) - T0) - 8 ))}  # what is left of TOTAL_S
    timeout $((TABLE_S + 5)) "$BIN/bench_moe" --out "$OUT/tables" --only moe_grouped_gemm_w4a16 --deadline-s $((TABLE_S - 3)) \
      --w4-variants "${TABLE_V:-8}" --w4-min-m 96 ${TABLE_ARGS:-} > "$OUT/bench_table.txt" 2>&1
    echo "table sweep exit: $?"; grep -cE '"variant"' "$OUT/tables/moe_grouped_gemm_w4a16.json" 2>/dev/null
  fi
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done in $(($(date +%s)-T0)) s"
} 2>&1 | tee "$LOG"
(cd "$OUT" && tar -czf diag.tar.gz $(ls sass_*.txt ncu_v*.txt memcheck.txt 2>/dev/null) && rm -f sass_*.txt ncu_v*.txt memcheck.txt)
[ -d "$OUT/tables" ] && (cd "$OUT" && tar -czf tables.tar.gz tables && rm -rf tables)
rm -rf "$OUT/tables_pf"
echo "==== SUMMARY ===="
grep -E "^w4pf .*(G=8 m=|ratio)" "$OUT/bench_pf.txt" 2>/dev/null | grep -v "rep=" | cut -c1-260
