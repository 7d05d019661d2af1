#!/usr/bin/env bash
# Device call of issue 13's w4f helper (NOTES.md §18): variant 17 = the default (15) with the byte-permute
# dequantisation dequant_word_p (kernel 17 = variant 5's decode kernel, kernel 18 = variant 15's prefill kernel).
# Every step under `timeout`, capped by a global guard (GUARD_S):
#  1. test_moe: W4A16Dequant.* (bit-exact old vs new dequant on the device), W4A16Decode17.*, PermuteDequant/*
#     (17 at bt 8..256), W4A16Prefill.ProducerWarpAndPairs (11-17), PermuteTest of 5 / 15 / 17;
#  2. compute-sanitizer memcheck of the new-variant tests;
#  3. `bench_moe --only w4cmp --models K3 --w4-max-m 32 --w4-variants 15,17` (the order alternates between its
#     2 repetitions): K3 w13 / w2, G 8 / 32, m 1..8, 12..32, event and graph TB/s over the touched weights;
#  4. `bench_moe --only w4pf --w4-variants 15,17` then `17,15` with cuBLAS dense interleaved;
#  5. SASS instruction mix of kernels 5/17 (bt 8) and 15/18;
#  6. (TABLE=1, tests + memcheck passed, 17 faster than 15 in both passes of both comparisons) the
#     moe_grouped_gemm_w4a16 sweeps of 15 then 17: decode keys (m <= 32) and prefill keys (m >= 96);
#  7. ncu of the decode kernel of 15 (kernel 5) and 17 at K3 w13 G=8 m=8 (bench_moe --probe).
# Binaries prebuilt in $BIN (carried). Reproduce: OUT=/tmp/out BIN=build-carry/w4f TABLE=1 bash kernels/moe/run_w4f.sh
set -u
BIN=${BIN:-build-carry/w4f}; OUT=${OUT:-/tmp/w4f-out}; GUARD_S=${GUARD_S:-450}
T0=$(date +%s)
LOG=$OUT/log.txt
mkdir -p "$OUT"
el() { echo "($(($(date +%s)-T0)) s)"; }
left() { [ $(($(date +%s)-T0)) -lt "$GUARD_S" ]; }
tmo() { local r=$((GUARD_S - ($(date +%s)-T0))); [ $r -lt 1 ] && r=1; [ "$1" -lt $r ] && echo "$1" || echo $r; }
{
  echo "== run_w4f.sh commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ) guard ${GUARD_S} s"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  TESTS_OK=1
  # PermuteTest index: Values(0..8, 11..17) -> 5 = v5, 13 = v15, 15 = v17
  F1='W4A16Dequant.*:W4A16Decode17.*:PermuteDequant/*:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/5:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/13:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/15'
  echo "== tests (new variant) $(el)"
  timeout $(tmo ${TEST1_S:-60}) "$BIN/test_moe" --gtest_filter="$F1" > "$OUT/test.txt" 2>&1
  rc=$?; echo "test_moe new-variant exit: $rc $(el)"; [ $rc = 0 ] || TESTS_OK=0
  grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|SEED|dequant_word_p" "$OUT/test.txt" | cut -c1-200 | head -20
  if left; then
    echo "== tests W4A16Prefill.ProducerWarpAndPairs (11-17) $(el)"
    timeout $(tmo ${TEST2_S:-50}) "$BIN/test_moe" --gtest_filter='W4A16Prefill.ProducerWarpAndPairs' >> "$OUT/test.txt" 2>&1
    rc=$?; echo "test_moe ProducerWarpAndPairs exit: $rc $(el)"; [ $rc = 0 ] || TESTS_OK=0
    grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|SEED" "$OUT/test.txt" | cut -c1-200 | tail -4
  fi
  echo "max rel L2 per variant:"; awk '/w4a16 v=/{for(i=1;i<=NF;i++) if ($i ~ /^v=/) {split($i,a,"="); v=a[2]}; e=$NF+0; if (e>m[v]) m[v]=e; n[v]++} END{for (v in m) print "  v" v ": " n[v] " checks, max " m[v]}' "$OUT/test.txt"
  if [ $TESTS_OK = 1 ] && left; then
    echo "== memcheck (new-variant tests) $(el)"
    timeout $(tmo ${MEMCHECK_S:-90}) compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_moe" \
      --gtest_filter="$F1" > "$OUT/memcheck.txt" 2>&1
    rc=$?; echo "memcheck exit: $rc $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | head -5
    echo "memcheck checks: $(grep -cE 'w4a16 v=|dequant_word_p' "$OUT/memcheck.txt")"
    [ $rc = 0 ] || TESTS_OK=0
  fi
  if left; then
    echo "== w4cmp 15,17 (K3, m <= 32) $(el)"
    B=$(tmo ${CMP_S:-70})
    timeout $B "$BIN/bench_moe" --out /tmp/w4f_cmp --only w4cmp --models K3 --w4-max-m 32 --deadline-s $((B > 20 ? B - 8 : 10)) \
      --w4-variants 15,17 > "$OUT/bench_cmp.txt" 2>&1
    echo "bench w4cmp exit: $? $(el)"
    grep -E "^w4cmp K3 .*median" "$OUT/bench_cmp.txt"
  fi
  for pass in 1 2; do
    V=15,17; [ $pass = 2 ] && V=17,15
    left || { echo "guard: w4pf pass $pass skipped"; continue; }
    echo "== w4pf pass $pass ($V) $(el)"
    B=$(tmo ${BENCH_S:-42})
    timeout $B "$BIN/bench_moe" --out "/tmp/w4f_pf$pass" --only w4pf --deadline-s $((B > 20 ? B - 8 : 10)) \
      --w4-variants "$V" > "$OUT/bench_pf$pass.txt" 2>&1
    echo "bench w4pf pass $pass exit: $? $(el)"
    grep -E "^w4pf v[0-9]+: ratio" "$OUT/bench_pf$pass.txt" | sort -u
  done
  for pass in 1 2; do grep -E "^w4pf v[0-9]+: ratio" "$OUT/bench_pf$pass.txt" 2>/dev/null | sort -u | sed "s/^/$pass /"; done > "$OUT/ratios.txt"
  # decode: 17 wins when its median t/t0 over m = 1-8 (event) is < 1 at all 4 K3 shapes (each shape's 2 reps alternate the order)
  # decode: per repetition (the order alternates), median over the 4 K3 shapes x m 1-8 of event t(17)/t(15) < 1 in both
  DWIN=$(python3 - "$OUT/bench_cmp.txt" <<'PY'
import re, sys, statistics
t = {}
for l in open(sys.argv[1]):
    m = re.match(r"w4cmp rep=(\d) (\S+ \S+ G=\d+) m=(\d+) bt=\d+ v=(\d+): event ([\d.]+)", l)
    if m and int(m.group(3)) <= 8: t[(m.group(1), m.group(2), m.group(3), m.group(4))] = float(m.group(5))
med = {}
for rep in "01":
    r = [t[(a, b, c, "17")] / t[(a, b, c, "15")] for (a, b, c, v) in t if a == rep and v == "15" and (a, b, c, "17") in t]
    med[rep] = statistics.median(r) if len(r) >= 16 else 9
print(1 if med["0"] < 1 and med["1"] < 1 else 0, "%.3f %.3f" % (med["0"], med["1"]))
PY
)
  echo "decode t(17)/t(15) median m 1-8 per repetition: $DWIN"; DWIN=${DWIN%% *}
  PWIN=$(awk '{v=substr($3,2)+0; r[v,$1]=$13; k[v]++} END{print (k[17]==2 && k[15]==2 && r[17,1]>r[15,1] && r[17,2]>r[15,2]) ? 1 : 0}' "$OUT/ratios.txt")
  echo "17 beats 15: decode (all 4 K3 shapes, m 1-8 median) $DWIN, prefill (median ratio to dense, both passes) $PWIN"
  for k in w4a16_decode_kernelILi8ELi2ELi0E w4a16_decode_kernelILi8ELi2ELi1E w4a16_prefill_pw_kernelILi256ELi3ELb0ELi0E w4a16_prefill_pw_kernelILi256ELi3ELb0ELi1E; do
    cuobjdump --dump-sass "$BIN/bench_moe" 2>/dev/null | awk -v pat="$k" '/Function : /{f=($0 ~ pat)} f' > "$OUT/sass_$k.txt"
    echo "SASS $k: $(wc -l < "$OUT/sass_$k.txt") lines, LOP3 $(grep -c 'LOP3' "$OUT/sass_$k.txt"), SHF $(grep -c ' SHF' "$OUT/sass_$k.txt"), IMAD.SHL $(grep -c 'IMAD.SHL' "$OUT/sass_$k.txt"), IMAD $(grep -cE 'IMAD[ .]' "$OUT/sass_$k.txt"), PRMT $(grep -c 'PRMT' "$OUT/sass_$k.txt"), HMUL2 $(grep -c 'HMUL2' "$OUT/sass_$k.txt"), LDL/STL $(grep -cE 'LDL|STL' "$OUT/sass_$k.txt")"
  done
  if [ "${TABLE:-0}" = 1 ] && [ $TESTS_OK = 1 ] && [ "$DWIN" = 1 -o "$PWIN" = 1 ]; then
    for tv in 15 17; do
      if [ "$DWIN" = 1 ] && left; then
        echo "== table sweep v$tv decode keys (m <= 32) $(el)"
        TS=$(tmo ${TABLE_DEC_S:-40})
        timeout $TS "$BIN/bench_moe" --out "$OUT/tables_dec_v$tv" --only moe_grouped_gemm_w4a16 --deadline-s $((TS > 20 ? TS - 5 : 10)) \
          --w4-variants "$tv" --w4-max-m 32 --w4-experts 8,28,24,32 --w4-max-rows 98304 > "$OUT/bench_table_dec_v$tv.txt" 2>&1
        echo "table sweep dec v$tv exit: $? $(el)"; grep -cE '"variant"' "$OUT/tables_dec_v$tv/moe_grouped_gemm_w4a16.json" 2>/dev/null
      fi
      if [ "$PWIN" = 1 ] && left; then
        echo "== table sweep v$tv prefill keys (m >= 96) $(el)"
        TS=$(tmo ${TABLE_PF_S:-45})
        timeout $TS "$BIN/bench_moe" --out "$OUT/tables_pf_v$tv" --only moe_grouped_gemm_w4a16 --deadline-s $((TS > 20 ? TS - 5 : 10)) \
          --w4-variants "$tv" --w4-min-m 96 --w4-experts 8,28,24,32 --w4-max-rows 98304 > "$OUT/bench_table_pf_v$tv.txt" 2>&1
        echo "table sweep pf v$tv exit: $? $(el)"; grep -cE '"variant"' "$OUT/tables_pf_v$tv/moe_grouped_gemm_w4a16.json" 2>/dev/null
      fi
    done
  fi
  if [ $TESTS_OK = 1 ] && left; then
    for v in 15 17; do
      left || continue
      echo "== ncu decode v$v (K3 w13 G=8 m=8) $(el)"
      timeout $(tmo ${NCU_S:-25}) ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
        --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
        -k regex:"w4a16_decode" -c 1 "$BIN/bench_moe" --out /tmp/probe --probe --w4-variants $v > "$OUT/ncu_dec_v$v.txt" 2>&1
      echo "ncu exit: $? $(el)"
      grep -E "^\s+(Duration|SM Frequency|Issue Slots Busy|Eligible Warps|No Eligible|Executed Instructions |Registers Per|DRAM Throughput|Memory Throughput|Achieved Occupancy)" "$OUT/ncu_dec_v$v.txt" | sort -u | cut -c1-150 | head -12
    done
  fi
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done $(el)"
} 2>&1 | tee "$LOG"
(cd "$OUT" && tar -czf diag.tar.gz $(ls sass_*.txt ncu_*.txt memcheck.txt 2>/dev/null) && rm -f sass_*.txt ncu_*.txt memcheck.txt)
ls -d "$OUT"/tables_* >/dev/null 2>&1 && (cd "$OUT" && tar -czf tables.tar.gz tables_* bench_table_*.txt && rm -rf tables_* bench_table_*.txt)
echo "==== SUMMARY ===="
grep -E "^w4cmp K3 .*m=[1-8]:" "$OUT/bench_cmp.txt" 2>/dev/null | cut -c1-260
grep -E "^w4pf .*(G=8 m=(1024|4096)|ratio)" "$OUT/bench_pf1.txt" 2>/dev/null | grep -v "rep=" | cut -c1-330
