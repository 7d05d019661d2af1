#!/usr/bin/env bash
# One device call for issue 13's W4A16 prefill variants 14 (producer in a consumer warp) and 15 (14 with a
# separate weight barrier per load slot, the weight copy issued first; NOTES.md §16-17). Adapted from
# run_w4c.sh / run_w4d.sh. Every step under `timeout`, capped by a global time guard (GUARD_S: no step
# starts after it, and none runs past it):
#  1. test_moe W4A16Prefill.* (v8 ModelShapesSkewed, v11-15 ProducerWarpAndPairs; a hang is possible in a new
#     pipeline: on a timeout nothing of 14/15 is timed and no table is swept), then the other W4A16 suites
#     (MoeHost, AllTiles / PrefillForms W4A16Test incl. 14 / 15, PermuteTest incl. 14 / 15 at bt 16 and 256,
#     StreamK);
#  2. compute-sanitizer memcheck of W4A16Prefill.*;
#  3. `bench_moe --only w4pf --w4-variants 11,14,15` then `15,14,11` (each interleaved with cuBLAS dense bf16
#     at the same FLOPs, G = 8, m = 128..4096, 6 shapes; 2 repetitions each, min of the medians);
#  4. BEST = 14 or 15, the higher mean over the 2 passes of the median ratio to dense at m >= 1024;
#     WIN = BEST beats 11 in both passes;
#  5. (TABLE=1, tests + memcheck passed, WIN) the moe_grouped_gemm_w4a16 sweeps of 11 then BEST (as run_w4c.sh
#     step 6);
#  6. ncu --set full --import-source of 15 then 14 at K3 w13 G=8 m=1024 (details + SASS source page CSV);
#  7. synccheck and racecheck of the bt-256 PrefillForms and PermuteTest instances of 14 and 15;
#  8. (as 5) the sweep of the other of 14 / 15 (informative only: it ran last);
#  9. SASS counts / resource usage of the 11, 14 and 15 kernels.
# Binaries prebuilt in $BIN (carried). Reproduce: OUT=/tmp/out BIN=build-carry/w4e TABLE=1 bash kernels/moe/run_w4e.sh
set -u
BIN=${BIN:-build-carry/w4e}; OUT=${OUT:-/tmp/w4e-out}; GUARD_S=${GUARD_S:-430}
T0=$(date +%s)
LOG=$OUT/log.txt
mkdir -p "$OUT"
el() { echo "($(($(date +%s)-T0)) s)"; }
left() { [ $(($(date +%s)-T0)) -lt "$GUARD_S" ]; }
# timeout for a step: its own cap, or what is left before the guard if less (at least 1 s)
tmo() { local r=$((GUARD_S - ($(date +%s)-T0))); [ $r -lt 1 ] && r=1; [ "$1" -lt $r ] && echo "$1" || echo $r; }
{
  echo "== run_w4e.sh commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ) guard ${GUARD_S} s"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  TESTS_OK=1; W4V=11,14,15
  echo "== tests W4A16Prefill.* $(el)"
  timeout $(tmo ${TEST1_S:-150}) "$BIN/test_moe" --gtest_filter='W4A16Prefill.*' > "$OUT/test.txt" 2>&1
  rc=$?; echo "test_moe W4A16Prefill exit: $rc $(el)"; [ $rc = 0 ] || TESTS_OK=0
  if [ $rc = 124 ]; then echo "HANG: no sanitizers, timing 11 and 14 only (14 passed in w4d), no table"; W4V=11,14; fi
  grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|SEED" "$OUT/test.txt" | cut -c1-200 | head -20
  if [ $rc != 124 ] && left; then
    echo "== tests other W4A16 suites $(el)"
    timeout $(tmo ${TEST2_S:-200}) "$BIN/test_moe" --gtest_filter='MoeHost*:AllTiles/W4A16Test*:PrefillForms/W4A16Test*:Variants/W4A16PermuteTest*:W4A16StreamK*' >> "$OUT/test.txt" 2>&1
    rc=$?; echo "test_moe other exit: $rc $(el)"; [ $rc = 0 ] || TESTS_OK=0
    grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|SEED" "$OUT/test.txt" | cut -c1-200 | head -30
  fi
  echo "max rel L2 per variant:"; awk '/w4a16 v=/{for(i=1;i<=NF;i++) if ($i ~ /^v=/) {split($i,a,"="); v=a[2]}; e=$NF+0; if (e>m[v]) m[v]=e; n[v]++} END{for (v in m) print "  v" v ": " n[v] " checks, max " m[v]}' "$OUT/test.txt"
  echo "permute bt 256: $(grep -c 'after device permute bt=256' "$OUT/test.txt") checks"
  if [ "$W4V" = 11,14,15 ] && left; then
    echo "== memcheck W4A16Prefill.* $(el)"
    timeout $(tmo ${MEMCHECK_S:-150}) compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_moe" \
      --gtest_filter='W4A16Prefill.*' > "$OUT/memcheck.txt" 2>&1
    rc=$?; echo "memcheck exit: $rc $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | head -5
    echo "memcheck checks: $(grep -cE 'w4a16 v=' "$OUT/memcheck.txt")"
    [ $rc = 0 ] || TESTS_OK=0
  fi
  [ $TESTS_OK = 1 ] || { echo "tests or memcheck failed: timing only, no table"; TABLE=0; }
  REV=$(echo "$W4V" | tr ',' '\n' | tac | paste -sd, -)
  for pass in 1 2; do
    V=$W4V; [ $pass = 2 ] && V=$REV
    left || { echo "guard: bench pass $pass skipped"; continue; }
    echo "== bench pass $pass ($V) $(el)"
    B=$(tmo ${BENCH_S:-90})
    timeout $B "$BIN/bench_moe" --out "/tmp/w4e_tables_pf$pass" --only w4pf --deadline-s $((B > 20 ? B - 10 : 10)) \
      --w4-variants "$V" > "$OUT/bench_pf$pass.txt" 2>&1
    echo "bench w4pf pass $pass exit: $? $(el)"
    grep -E "^w4pf v[0-9]+: ratio" "$OUT/bench_pf$pass.txt" | sort -u
  done
  for pass in 1 2; do grep -E "^w4pf v[0-9]+: ratio" "$OUT/bench_pf$pass.txt" 2>/dev/null | sort -u | sed "s/^/$pass /"; done > "$OUT/ratios.txt"
  # $13 = the median ratio ("1 w4pf v15: ratio to cuBLAS dense at m >= 1024: median 0.838, ...")
  BEST=$(awk '{v=substr($3,2)+0; s[v]+=$13; n[v]++} END{b=-1; bv=0; for (v in s) if ((v==14 || v==15) && n[v]==2 && s[v]/2>bv) {bv=s[v]/2; b=v}; print b}' "$OUT/ratios.txt")
  WIN=$(awk -v b="$BEST" '{v=substr($3,2)+0; r[v,$1]=$13; k[v]++} END{print (k[b]==2 && k[11]==2 && r[b,1]>r[11,1] && r[b,2]>r[11,2]) ? 1 : 0}' "$OUT/ratios.txt")
  echo "best of 14/15: v$BEST; faster than v11 in both passes: $WIN"
  SWEEP=0; [ "${TABLE:-0}" = 1 ] && [ $TESTS_OK = 1 ] && [ "$WIN" = 1 ] && SWEEP=1
  OTHER=$([ "$BEST" = 15 ] && echo 14 || echo 15)
  sweep() {
    local tv=$1
    left || { echo "guard: table sweep v$tv skipped"; return; }
    echo "== table sweep v$tv $(el)"
    local TS=$(tmo ${TABLE_S:-120})
    timeout $TS "$BIN/bench_moe" --out "$OUT/tables_v$tv" --only moe_grouped_gemm_w4a16 --deadline-s $((TS > 20 ? TS - 10 : 10)) \
      --w4-variants "$tv" --w4-min-m 96 --w4-experts 8,28,24,32 --w4-max-rows 98304 > "$OUT/bench_table_v$tv.txt" 2>&1
    echo "table sweep v$tv exit: $? $(el)"; grep -cE '"variant"' "$OUT/tables_v$tv/moe_grouped_gemm_w4a16.json" 2>/dev/null
  }
  if [ $SWEEP = 1 ]; then sweep 11; sweep $BEST; fi
  if [ "$W4V" = 11,14,15 ]; then
    for v in 15 14; do
      left || { echo "guard: ncu v$v skipped"; continue; }
      echo "== ncu v$v $(el)"
      timeout $(tmo ${NCU_S:-50}) ncu --clock-control none --set full --import-source yes --kernel-name-base mangled \
        -k regex:"w4a16_prefill" -c 1 -o "$OUT/ncu_v$v" "$BIN/bench_moe" --out /tmp/probe --probe --w4-variants "$v" > "$OUT/ncu_run_v$v.txt" 2>&1
      echo "ncu exit: $? $(el)"
      left && timeout $(tmo 30) ncu -i "$OUT/ncu_v$v.ncu-rep" --print-details all > "$OUT/ncu_v$v.txt" 2>&1
      left && timeout $(tmo 30) ncu -i "$OUT/ncu_v$v.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_src_v$v.csv" 2>&1
      grep -E "Duration|SM Frequency|Issue Slots Busy|Eligible Warps|Pipe Tensor Cycles|Registers Per" "$OUT/ncu_v$v.txt" 2>/dev/null | sort -u | cut -c1-150 | head -10
    done
    # PrefillForms index = bt index (32, 128, 256) x 5 + variant index (11..15): 13 = bt 256 v14, 14 = bt 256 v15;
    # PermuteTest index 12 = v14, 13 = v15 (values 0..8, 11..15)
    SF='PrefillForms/W4A16Test.MatchesDoubleReference/13:PrefillForms/W4A16Test.MatchesDoubleReference/14:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/12:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/13'
    for tool in synccheck racecheck; do
      left || { echo "guard: $tool skipped"; continue; }
      echo "== $tool (bt 256 PrefillForms + PermuteTest of 14, 15) $(el)"
      timeout $(tmo ${SAN2_S:-60}) compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/test_moe" \
        --gtest_filter="$SF" > "$OUT/$tool.txt" 2>&1
      rc=$?; echo "$tool exit: $rc $(el)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$tool.txt" | head -5
      echo "$tool checks: $(grep -cE 'w4a16 v=' "$OUT/$tool.txt")"
    done
  fi
  [ $SWEEP = 1 ] && sweep $OTHER  # informative: ran last
  for k in w4a16_prefill_pw_kernelILi256ELi1ELb0E w4a16_prefill_pw_kernelILi256ELi2ELb0E w4a16_prefill_pw_kernelILi256ELi3ELb0E; do
    cuobjdump --dump-sass "$BIN/bench_moe" 2>/dev/null | awk -v pat="$k" '/Function : /{f=($0 ~ pat)} f' > "$OUT/sass_$k.txt"
    echo "SASS $k: $(grep -c HGMMA "$OUT/sass_$k.txt") HGMMA, $(grep -cE 'LDL|STL' "$OUT/sass_$k.txt") LDL/STL, $(grep -c STSM "$OUT/sass_$k.txt") STSM, $(grep -c SYNCS "$OUT/sass_$k.txt") SYNCS, $(wc -l < "$OUT/sass_$k.txt") lines"
  done
  cuobjdump --dump-resource-usage "$BIN/bench_moe" 2>/dev/null | grep -A1 "w4a16_prefill_pw" | grep -oE "Function [^:]*|REG:[0-9]+|STACK:[0-9]+|SHARED:[0-9]+|LOCAL:[0-9]+" | paste -sd' ' | sed 's/Function /\nFunction /g'
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done $(el)"
} 2>&1 | tee "$LOG"
# at most 8 files come back: log, test, bench_pf1/2, ratios, diag (sanitizers, ncu text + source CSV, SASS),
# ncu reports, tables
(cd "$OUT" && tar -czf diag.tar.gz $(ls sass_*.txt ncu_v*.txt ncu_run_v*.txt ncu_src_v*.csv memcheck.txt synccheck.txt racecheck.txt 2>/dev/null) && rm -f sass_*.txt ncu_v*.txt ncu_run_v*.txt ncu_src_v*.csv memcheck.txt synccheck.txt racecheck.txt)
ls "$OUT"/*.ncu-rep >/dev/null 2>&1 && (cd "$OUT" && tar -czf ncu_rep.tar.gz *.ncu-rep && rm -f *.ncu-rep)
ls -d "$OUT"/tables_v* >/dev/null 2>&1 && (cd "$OUT" && tar -czf tables.tar.gz tables_v* bench_table_v*.txt && rm -rf tables_v* bench_table_v*.txt)
echo "==== SUMMARY ===="
grep -E "^w4pf .*(G=8 m=(1024|4096)|ratio)" "$OUT/bench_pf1.txt" 2>/dev/null | grep -v "rep=" | cut -c1-330
