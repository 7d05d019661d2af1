#!/usr/bin/env bash
# One device call for issue 13's W4A16 prefill variant 14 (producer in a consumer warp; NOTES.md §15-16),
# its first GPU run in the fixed form (606e9e2). Every step under `timeout`, a global time guard (GUARD_S):
#  1. test_moe W4A16PrefillUntested.ConsumerProducer14 alone (timeout 120: its first form hung); on failure
#     or hang nothing else runs;
#  2. compute-sanitizer memcheck of it;
#  3. the regular W4A16 suites that cover variant 11 (W4A16Prefill.*, PrefillForms/W4A16Test,
#     Variants/W4A16PermuteTest);
#  4. `bench_moe --only w4pf --w4-variants 11,14` then `14,11` (each interleaved with cuBLAS dense bf16 at
#     the same FLOPs, G = 8, m = 128..4096, 6 shapes);
#  5. ncu --set full --import-source of v14, then v11 (same run), at K3 w13 G=8 m=1024 (bench_moe --probe);
#  6. SASS counts / resource usage of the v11 and v14 kernels.
# Binaries prebuilt in $BIN (carried). Reproduce: OUT=/tmp/out BIN=build-carry/w4d bash kernels/moe/run_w4d.sh
# After this call the test was folded into W4A16Prefill.ProducerWarpAndPairs (the same 7 cases, with 11-13):
# with binaries built after that, pass V14_FILTER=W4A16Prefill.ProducerWarpAndPairs.
set -u
BIN=${BIN:-build-carry/w4d}; OUT=${OUT:-/tmp/w4d-out}; GUARD_S=${GUARD_S:-165}
V14_FILTER=${V14_FILTER:-W4A16PrefillUntested.ConsumerProducer14}
T0=$(date +%s)
LOG=$OUT/log.txt
mkdir -p "$OUT"
el() { echo "($(($(date +%s)-T0)) s)"; }
left() { [ $(($(date +%s)-T0)) -lt "$GUARD_S" ]; }
{
  echo "== run_w4d.sh commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  OK=1
  echo "== test v14 $(el)"
  timeout ${TEST1_S:-120} "$BIN/test_moe" --gtest_filter="$V14_FILTER" > "$OUT/test.txt" 2>&1
  rc=$?; echo "test_moe ConsumerProducer14 exit: $rc $(el)"; [ $rc = 0 ] || OK=0
  grep -E "^\[  (PASSED|FAILED)|^\[       OK|FAILED|Failure|SEED" "$OUT/test.txt" | cut -c1-200 | head -20
  awk '/w4a16 v=/' "$OUT/test.txt" | cut -c1-200 | head -10
  if [ $OK = 1 ]; then
    echo "== memcheck v14 $(el)"
    timeout ${MEMCHECK_S:-60} compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_moe" \
      --gtest_filter="$V14_FILTER" > "$OUT/memcheck.txt" 2>&1
    rc=$?; echo "memcheck exit: $rc $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | head -5
    echo "memcheck checks: $(grep -cE 'w4a16 v=' "$OUT/memcheck.txt")"
    [ $rc = 0 ] || OK=0
    echo "== regular W4A16 suites $(el)"
    timeout ${TEST2_S:-90} "$BIN/test_moe" --gtest_filter='W4A16Prefill.*:PrefillForms/W4A16Test*:Variants/W4A16PermuteTest*' >> "$OUT/test.txt" 2>&1
    rc=$?; echo "test_moe regular exit: $rc $(el)"
    grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" "$OUT/test.txt" | cut -c1-200 | head -20
    echo "max rel L2 per variant:"; awk '/w4a16 v=/{for(i=1;i<=NF;i++) if ($i ~ /^v=/) {split($i,a,"="); v=a[2]}; e=$NF+0; if (e>m[v]) m[v]=e; n[v]++} END{for (v in m) print "  v" v ": " n[v] " checks, max " m[v]}' "$OUT/test.txt"
    for pass in 1 2; do
      V=11,14; [ $pass = 2 ] && V=14,11
      left || { echo "guard: bench pass $pass skipped"; continue; }
      echo "== bench pass $pass ($V) $(el)"
      timeout ${BENCH_S:-60} "$BIN/bench_moe" --out "/tmp/w4d_tables_pf$pass" --only w4pf --deadline-s 50 \
        --w4-variants "$V" > "$OUT/bench_pf$pass.txt" 2>&1
      echo "bench w4pf pass $pass exit: $? $(el)"
      grep -E "^w4pf v[0-9]+: ratio" "$OUT/bench_pf$pass.txt"
    done
    for v in 14 11; do
      left || { echo "guard: ncu v$v skipped"; continue; }
      echo "== ncu v$v $(el)"
      timeout ${NCU_S:-50} ncu --clock-control none --set full --import-source yes --kernel-name-base mangled \
        -k regex:"w4a16_prefill" -c 1 -o "$OUT/ncu_v$v" "$BIN/bench_moe" --out /tmp/probe --probe --w4-variants "$v" > "$OUT/ncu_run_v$v.txt" 2>&1
      echo "ncu exit: $? $(el)"
      timeout 30 ncu -i "$OUT/ncu_v$v.ncu-rep" --print-details all > "$OUT/ncu_v$v.txt" 2>&1
      left && timeout 30 ncu -i "$OUT/ncu_v$v.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_src_v$v.csv" 2>&1
      grep -E "Duration|SM Frequency|Issue Slots Busy|Eligible Warps|Pipe Tensor Cycles|Registers Per" "$OUT/ncu_v$v.txt" | sort -u | cut -c1-150 | head -10
    done
  else
    echo "v14 test failed or hung: nothing else run"
  fi
  for k in w4a16_prefill_pw_kernelILi256ELi1ELb0E w4a16_prefill_pw_kernelILi256ELi2ELb0E; do
    cuobjdump --dump-sass "$BIN/bench_moe" 2>/dev/null | awk -v pat="$k" '/Function : /{f=($0 ~ pat)} f' > "$OUT/sass_$k.txt"
    echo "SASS $k: $(grep -c HGMMA "$OUT/sass_$k.txt") HGMMA, $(grep -cE 'LDL|STL' "$OUT/sass_$k.txt") LDL/STL, $(grep -c STSM "$OUT/sass_$k.txt") STSM, $(wc -l < "$OUT/sass_$k.txt") lines"
  done
  cuobjdump --dump-resource-usage "$BIN/bench_moe" 2>/dev/null | grep -A1 "w4a16_prefill_pw" | grep -oE "Function [^:]*|REG:[0-9]+|STACK:[0-9]+|SHARED:[0-9]+|LOCAL:[0-9]+" | paste -sd' ' | sed 's/Function /\nFunction /g'
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done $(el)"
} 2>&1 | tee "$LOG"
# at most 8 files come back: log, test, bench_pf1/2, diag (memcheck, ncu text + source CSV, SASS), ncu reports
(cd "$OUT" && tar -czf diag.tar.gz $(ls sass_*.txt ncu_v*.txt ncu_run_v*.txt ncu_src_v*.csv memcheck.txt 2>/dev/null) && rm -f sass_*.txt ncu_v*.txt ncu_run_v*.txt ncu_src_v*.csv memcheck.txt)
ls "$OUT"/*.ncu-rep >/dev/null 2>&1 && (cd "$OUT" && tar -czf ncu_rep.tar.gz *.ncu-rep && rm -f *.ncu-rep)
echo "==== SUMMARY ===="
grep -E "^w4pf .*(G=8 m=(1024|4096)|ratio)" "$OUT/bench_pf1.txt" 2>/dev/null | grep -v "rep=" | cut -c1-330
