#!/usr/bin/env bash
# Second device call of issue 13's w4e helper (NOTES.md §17): W4A16 prefill variant 16 (15 with the weight blocks
# in their own 7-slot ring, loaded and released by the decoding warps), first GPU run. Adapted from run_w4e.sh;
# every step under `timeout`, capped by a global guard (GUARD_S):
#  1. test_moe W4A16Prefill.* (v8, v11-16; on a hang or failure only 15 is timed, no table), then PrefillForms
#     and PermuteTest (incl. 16 at bt 256);
#  2. compute-sanitizer memcheck of W4A16Prefill.*;
#  3. `bench_moe --only w4pf --w4-variants 15,16` then `16,15` (cuBLAS dense interleaved);
#  4. (TABLE=1, tests + memcheck passed, 16 beats 15 in both passes) the moe_grouped_gemm_w4a16 sweeps of 15 then
#     16 (as run_w4e.sh);
#  5. ncu --set full --import-source of 16 at K3 w13 G=8 m=1024;
#  6. synccheck of the bt-256 PrefillForms and PermuteTest instances of 16; SASS counts.
# Binaries prebuilt in $BIN (carried). Reproduce: OUT=/tmp/out BIN=build-carry/w4e TABLE=1 bash kernels/moe/run_w4e2.sh
set -u
BIN=${BIN:-build-carry/w4e}; OUT=${OUT:-/tmp/w4e2-out}; GUARD_S=${GUARD_S:-200}
T0=$(date +%s)
LOG=$OUT/log.txt
mkdir -p "$OUT"
el() { echo "($(($(date +%s)-T0)) s)"; }
left() { [ $(($(date +%s)-T0)) -lt "$GUARD_S" ]; }
tmo() { local r=$((GUARD_S - ($(date +%s)-T0))); [ $r -lt 1 ] && r=1; [ "$1" -lt $r ] && echo "$1" || echo $r; }
{
  echo "== run_w4e2.sh commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ) guard ${GUARD_S} s"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  TESTS_OK=1; W4V=15,16
  echo "== tests W4A16Prefill.* $(el)"
  timeout $(tmo ${TEST1_S:-100}) "$BIN/test_moe" --gtest_filter='W4A16Prefill.*' > "$OUT/test.txt" 2>&1
  rc=$?; echo "test_moe W4A16Prefill exit: $rc $(el)"; [ $rc = 0 ] || { TESTS_OK=0; W4V=15; }
  grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|SEED" "$OUT/test.txt" | cut -c1-200 | head -20
  if [ $TESTS_OK = 1 ] && left; then
    echo "== tests PrefillForms + PermuteTest $(el)"
    timeout $(tmo ${TEST2_S:-80}) "$BIN/test_moe" --gtest_filter='PrefillForms/W4A16Test*:Variants/W4A16PermuteTest*' >> "$OUT/test.txt" 2>&1
    rc=$?; echo "test_moe other exit: $rc $(el)"; [ $rc = 0 ] || { TESTS_OK=0; W4V=15; }
    grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|SEED" "$OUT/test.txt" | cut -c1-200 | head -30
  fi
  echo "max rel L2 per variant:"; awk '/w4a16 v=/{for(i=1;i<=NF;i++) if ($i ~ /^v=/) {split($i,a,"="); v=a[2]}; e=$NF+0; if (e>m[v]) m[v]=e; n[v]++} END{for (v in m) print "  v" v ": " n[v] " checks, max " m[v]}' "$OUT/test.txt"
  if [ $TESTS_OK = 1 ] && left; then
    echo "== memcheck W4A16Prefill.* $(el)"
    timeout $(tmo ${MEMCHECK_S:-90}) compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_moe" \
      --gtest_filter='W4A16Prefill.*' > "$OUT/memcheck.txt" 2>&1
    rc=$?; echo "memcheck exit: $rc $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | head -5
    echo "memcheck checks: $(grep -cE 'w4a16 v=' "$OUT/memcheck.txt")"
    [ $rc = 0 ] || TESTS_OK=0
  fi
  REV=$(echo "$W4V" | tr ',' '\n' | tac | paste -sd, -)
  for pass in 1 2; do
    V=$W4V; [ $pass = 2 ] && V=$REV
    left || { echo "guard: bench pass $pass skipped"; continue; }
    echo "== bench pass $pass ($V) $(el)"
    B=$(tmo ${BENCH_S:-40})
    timeout $B "$BIN/bench_moe" --out "/tmp/w4e2_tables_pf$pass" --only w4pf --deadline-s $((B > 20 ? B - 8 : 10)) \
      --w4-variants "$V" > "$OUT/bench_pf$pass.txt" 2>&1
    echo "bench w4pf pass $pass exit: $? $(el)"
    grep -E "^w4pf v[0-9]+: ratio" "$OUT/bench_pf$pass.txt" | sort -u
  done
  for pass in 1 2; do grep -E "^w4pf v[0-9]+: ratio" "$OUT/bench_pf$pass.txt" 2>/dev/null | sort -u | sed "s/^/$pass /"; done > "$OUT/ratios.txt"
  WIN=$(awk '{v=substr($3,2)+0; r[v,$1]=$13; k[v]++} END{print (k[16]==2 && k[15]==2 && r[16,1]>r[15,1] && r[16,2]>r[15,2]) ? 1 : 0}' "$OUT/ratios.txt")
  echo "16 beats 15 in both passes: $WIN"
  if [ "${TABLE:-0}" = 1 ] && [ $TESTS_OK = 1 ] && [ "$WIN" = 1 ]; then
    for tv in 15 16; do
      left || { echo "guard: table sweep v$tv skipped"; continue; }
      echo "== table sweep v$tv $(el)"
      TS=$(tmo ${TABLE_S:-40})
      timeout $TS "$BIN/bench_moe" --out "$OUT/tables_v$tv" --only moe_grouped_gemm_w4a16 --deadline-s $((TS > 20 ? TS - 5 : 10)) \
        --w4-variants "$tv" --w4-min-m 96 --w4-experts 8,28,24,32 --w4-max-rows 98304 > "$OUT/bench_table_v$tv.txt" 2>&1
      echo "table sweep v$tv exit: $? $(el)"; grep -cE '"variant"' "$OUT/tables_v$tv/moe_grouped_gemm_w4a16.json" 2>/dev/null
    done
  fi
  if [ $TESTS_OK = 1 ] && left; then
    echo "== ncu v16 $(el)"
    timeout $(tmo ${NCU_S:-30}) ncu --clock-control none --set full --import-source yes --kernel-name-base mangled \
      -k regex:"w4a16_prefill" -c 1 -o "$OUT/ncu_v16" "$BIN/bench_moe" --out /tmp/probe --probe --w4-variants 16 > "$OUT/ncu_run_v16.txt" 2>&1
    echo "ncu exit: $? $(el)"
    left && timeout $(tmo 20) ncu -i "$OUT/ncu_v16.ncu-rep" --print-details all > "$OUT/ncu_v16.txt" 2>&1
    left && timeout $(tmo 20) ncu -i "$OUT/ncu_v16.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_src_v16.csv" 2>&1
    grep -E "Duration|SM Frequency|Issue Slots Busy|Eligible Warps|Pipe Tensor Cycles|Registers Per" "$OUT/ncu_v16.txt" 2>/dev/null | sort -u | cut -c1-150 | head -10
  fi
  if [ $TESTS_OK = 1 ] && left; then
    # PrefillForms index = bt index (32, 128, 256) x 6 + variant index (11..16): 17 = bt 256 v16; PermuteTest 14 = v16
    echo "== synccheck (bt 256 PrefillForms + PermuteTest of 16) $(el)"
    timeout $(tmo ${SAN2_S:-30}) compute-sanitizer --tool synccheck --error-exitcode 9 "$BIN/test_moe" \
      --gtest_filter='PrefillForms/W4A16Test.MatchesDoubleReference/17:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/14' > "$OUT/synccheck.txt" 2>&1
    rc=$?; echo "synccheck exit: $rc $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/synccheck.txt" | head -5
    echo "synccheck checks: $(grep -cE 'w4a16 v=' "$OUT/synccheck.txt")"
  fi
  for k in w4a16_prefill_pw_kernelILi256ELi3ELb0E w4a16_prefill_pw_kernelILi256ELi4ELb0E; do
    cuobjdump --dump-sass "$BIN/bench_moe" 2>/dev/null | awk -v pat="$k" '/Function : /{f=($0 ~ pat)} f' > "$OUT/sass_$k.txt"
    echo "SASS $k: $(grep -c HGMMA "$OUT/sass_$k.txt") HGMMA, $(grep -cE 'LDL|STL' "$OUT/sass_$k.txt") LDL/STL, $(grep -c STSM "$OUT/sass_$k.txt") STSM, $(grep -c SYNCS "$OUT/sass_$k.txt") SYNCS, $(wc -l < "$OUT/sass_$k.txt") lines"
  done
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done $(el)"
} 2>&1 | tee "$LOG"
(cd "$OUT" && tar -czf diag.tar.gz $(ls sass_*.txt ncu_v*.txt ncu_run_v*.txt ncu_src_v*.csv memcheck.txt synccheck.txt 2>/dev/null) && rm -f sass_*.txt ncu_v*.txt ncu_run_v*.txt ncu_src_v*.csv memcheck.txt synccheck.txt)
ls "$OUT"/*.ncu-rep >/dev/null 2>&1 && (cd "$OUT" && tar -czf ncu_rep.tar.gz *.ncu-rep && rm -f *.ncu-rep)
ls -d "$OUT"/tables_v* >/dev/null 2>&1 && (cd "$OUT" && tar -czf tables.tar.gz tables_v* bench_table_v*.txt && rm -rf tables_v* bench_table_v*.txt)
echo "==== SUMMARY ===="
grep -E "^w4pf .*(G=8 m=(1024|4096)|ratio)" "$OUT/bench_pf1.txt" 2>/dev/null | grep -v "rep=" | cut -c1-330
