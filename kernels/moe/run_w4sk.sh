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
      --gtest_filter="${MEMCHECK_FILTER:-W4A16StreamK*:AllTiles/W4A16Test.MatchesDoubleReference/7:AllTiles/W4A16Test.MatchesDoubleReference/15:AllTiles/W4A16Test.MatchesDoubleReference/23:Variants/W4A16PermuteTest.*/7}" > "$OUT/memcheck.txt" 2>&1
    echo "memcheck exit: $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | head -5
  fi
  echo "== bench ($(($(date +%s)-T0)) s)"
  # OLD_BENCH (optional): a bench_moe of an earlier commit, run alternately with this one (old, new, old, new)
  for r in 1 2; do
    if [ -n "${OLD_BENCH:-}" ]; then
      timeout $((BENCH_S + 60)) "$OLD_BENCH" --out "$OUT/tables_old" --only w4cmp --deadline-s "$BENCH_S" --w4-variants "${OLD_W4V:-5}" > "$OUT/bench_old$r.txt" 2>&1
      echo "old bench $r exit: $?"
    fi
    timeout $((BENCH_S + 60)) "$BUILD/kernels/moe/bench_moe" --out "$OUT/tables" --only "${ONLY:-moe_ref_ceilings,w4cmp}" --deadline-s "$BENCH_S" \
      --w4-variants "$W4V" ${BENCH_ARGS:-} > "$OUT/bench$r.txt" 2>&1
    echo "bench $r exit: $?"
    [ -z "${OLD_BENCH:-}" ] && break
  done
  if [ -n "${OLD_BENCH:-}" ]; then  # prefill tiles (variant 0) old vs new: the bench's variant comparison rows, K3 G=8 m 1..1024
    for r in 1 2; do
      for b in "$OLD_BENCH" "$BUILD/kernels/moe/bench_moe"; do
        echo "== pf $r $b"; timeout 120 "$b" --out /tmp/pf --only moe_grouped_gemm_w4a16 --models K3 --deadline-s 1 --w4-variants 5,0 2>&1 | grep "w4a16 kernel variant"
      done
    done > "$OUT/bench_pf.txt" 2>&1
  fi
  cat "$OUT"/bench_old*.txt > "$OUT/bench_old.txt" 2>/dev/null; cat "$OUT"/bench[12].txt > "$OUT/bench.txt"; rm -f "$OUT"/bench_old[12].txt "$OUT"/bench[12].txt
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
    cuobjdump --dump-sass "$BUILD/kernels/moe/bench_moe" 2>/dev/null | awk -v pat="$k" '/Function : /{f=($0 ~ pat)} f' > "$OUT/sass_$k.txt"
    echo "SASS $k: $(grep -c HGMMA "$OUT/sass_$k.txt") HGMMA, $(grep -cE 'LDL|STL' "$OUT/sass_$k.txt") LDL/STL, $(grep -c HMUL2 "$OUT/sass_$k.txt") HMUL2, $(wc -l < "$OUT/sass_$k.txt") lines"
  done
  tar -czf "$OUT/diag.tar.gz" -C "$OUT" $(cd "$OUT" && ls sass_*.txt ncu_v*.txt) && rm -f "$OUT"/sass_*.txt
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done in $(($(date +%s)-T0)) s"
} 2>&1 | tee "$LOG"
rm -rf "$OUT"/tables "$OUT"/tables_old; ncu_keep=$(ls "$OUT"/ncu_v*.txt 2>/dev/null); [ -n "$ncu_keep" ] && rm -f $ncu_keep  # ncu reports are in diag.tar.gz (8-file limit)
gzip -f "$OUT/memcheck.txt" 2>/dev/null
echo "==== SUMMARY ===="
[ -f "$OUT/bench_old.txt" ] && grep -E "^w4cmp .*m=[0-9]+:" "$OUT/bench_old.txt" | grep -E " m=(1|8|32|2048):" | cut -c1-120
grep -E "^w4cmp .*(median|m=[0-9]+:)" "$OUT/bench.txt" | grep -E "median| m=(1|8|32|2048):" | cut -c1-230
