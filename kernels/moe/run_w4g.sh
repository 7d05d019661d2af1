#!/usr/bin/env bash
# Device calls of issue 13's w4g helper (NOTES.md §19). Kernel 20 = kernel 17's stage with the wgmma groups pipelined
# per k-block (2 x 16 A registers, __launch_bounds__(288, 3), 7 stages at BT 8: 3 CTAs per SM).
# Call 1 (e332d58): variant 20 = kernel 20 at every bt <= 32 (F1 / F2 = the call-1 filters below, CALL=1).
# Call 2 (CALL=2, default): variant 20 = THE DEFAULT = kernel 20 at bt 8 on grids of more than 2 CTAs per SM (else 17);
# variant 21 = kernel 20 at every bt 8 grid (tests). Every step under `timeout`, capped by a global guard (GUARD_S):
#  1. test_moe: call 1: PermuteDequant/*, W4A16Decode17.*, PermuteTest of 17 / 20; call 2: the W4A16 suites under the
#     new default (MoeHost, AllTiles, PrefillForms, PermuteDequant (17-21), W4A16Dequant, W4A16Decode17 (17, 19-21),
#     PermuteTest (all; 20 / 21 also at bt 8), W4A16Prefill.*, StreamK);
#  2. compute-sanitizer memcheck of the kernel-20 tests;
#  3. `bench_moe --only w4cmp --w4-max-m 32 --w4-variants 17,20` (all 7 decode shapes: K3 w13 / w2 G 8 / 32,
#     DSV4-Pro w13 G 32, DSV4-Flash w2 G 8 / 32; m 1..8, 12..32; the order alternates between the 2 repetitions);
#  4. gate: tests + memcheck pass, per repetition the median over the 7 shapes x m 1-8 of event t(20)/t(17) < 1,
#     and at every one of those points min-over-repetitions t(20)/t(17) <= 1/0.97;
#  5. (TABLE=1 and the gate) the moe_grouped_gemm_w4a16 decode sweeps (m <= 32) of 17 then 20;
#  6. SASS mix of kernels 17 / 20 (bt 8); ncu of the decode kernel of 17 and 20 (K3 w13 G=8 m=8).
# Reproduce: OUT=/tmp/out BIN=<dir with test_moe, bench_moe> TABLE=1 [CALL=1] bash kernels/moe/run_w4g.sh
set -u
BIN=${BIN:-build-carry/w4g}; OUT=${OUT:-/tmp/w4g-out}; GUARD_S=${GUARD_S:-200}
T0=$(date +%s)
LOG=$OUT/log.txt
mkdir -p "$OUT"
for f in test_moe bench_moe; do [ -f "$BIN/$f" ] || { gunzip -c "$BIN/$f.gz" > "/tmp/$f" && chmod +x "/tmp/$f"; }; done
[ -f "$BIN/test_moe" ] || BIN=/tmp
el() { echo "($(($(date +%s)-T0)) s)"; }
left() { [ $(($(date +%s)-T0)) -lt "$GUARD_S" ]; }
tmo() { local r=$((GUARD_S - ($(date +%s)-T0))); [ $r -lt 1 ] && r=1; [ "$1" -lt $r ] && echo "$1" || echo $r; }
{
  echo "== run_w4g.sh commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ) guard ${GUARD_S} s"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  TESTS_OK=1
  # PermuteTest index: Values(0..8, 11..20) -> 15 = v17, 18 = v20
  if [ "${CALL:-2}" = 1 ]; then
    F1=${F1:-'PermuteDequant/*:W4A16Decode17.*:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/15:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/18'}
    F2=${F2:-'W4A16Decode17.*:PermuteDequant/W4A16Test.MatchesDoubleReference/3:PermuteDequant/W4A16Test.MatchesDoubleReference/7:PermuteDequant/W4A16Test.MatchesDoubleReference/11:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/18'}
  else  # PermuteDequant index = bt index x 5 + (17..21 -> 0..4): 3 / 4 = 20 / 21 at bt 8; PermuteTest 18 / 19 = 20 / 21
    F1=${F1:-'MoeHost.*:AllTiles/W4A16Test*:PrefillForms/W4A16Test*:PermuteDequant/*:W4A16Dequant.*:W4A16Decode17.*:Variants/W4A16PermuteTest*:W4A16Prefill.*:W4A16StreamK.*'}
    F2=${F2:-'W4A16Decode17.*:PermuteDequant/W4A16Test.MatchesDoubleReference/3:PermuteDequant/W4A16Test.MatchesDoubleReference/4:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/18:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/19'}
  fi
  echo "== tests $F1 $(el)"
  timeout $(tmo ${TEST1_S:-150}) "$BIN/test_moe" --gtest_filter="$F1" > "$OUT/test.txt" 2>&1
  rc=$?; echo "test_moe exit: $rc $(el)"; [ $rc = 0 ] || TESTS_OK=0
  grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|SEED" "$OUT/test.txt" | cut -c1-200 | head -20
  echo "max rel L2 per variant:"; awk '/w4a16 v=/{for(i=1;i<=NF;i++) if ($i ~ /^v=/) {split($i,a,"="); v=a[2]}; e=$NF+0; if (e>m[v]) m[v]=e; n[v]++} END{for (v in m) print "  v" v ": " n[v] " checks, max " m[v]}' "$OUT/test.txt"
  if [ $TESTS_OK = 1 ] && left; then
    echo "== memcheck $F2 $(el)"
    timeout $(tmo ${MEMCHECK_S:-90}) compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_moe" \
      --gtest_filter="$F2" > "$OUT/memcheck.txt" 2>&1
    rc=$?; echo "memcheck exit: $rc $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | head -5
    echo "memcheck checks: $(grep -cE 'w4a16 v=' "$OUT/memcheck.txt")"
    [ $rc = 0 ] || TESTS_OK=0
  fi
  if left; then
    echo "== w4cmp 17,20 (all decode shapes, m <= 32) $(el)"
    B=$(tmo ${CMP_S:-60})
    timeout $B "$BIN/bench_moe" --out /tmp/w4g_cmp --only w4cmp --w4-max-m 32 --deadline-s $((B > 20 ? B - 8 : 10)) \
      --w4-variants 17,20 > "$OUT/bench_cmp.txt" 2>&1
    echo "bench w4cmp exit: $? $(el)"
    grep -E "^w4cmp .*median" "$OUT/bench_cmp.txt"
  fi
  GATE=$(python3 - "$OUT/bench_cmp.txt" <<'PY'
import re, sys, statistics
t = {}
for l in open(sys.argv[1]):
    m = re.match(r"w4cmp rep=(\d) (\S+ \S+ G=\d+) m=(\d+) bt=\d+ v=(\d+): event ([\d.]+)", l)
    if m and int(m.group(3)) <= 8: t[(m.group(1), m.group(2), int(m.group(3)), m.group(4))] = float(m.group(5))
pts = sorted({(b, c) for (a, b, c, v) in t})
med = {}
for rep in "01":
    r = [t[(rep, b, c, "20")] / t[(rep, b, c, "17")] for (b, c) in pts if (rep, b, c, "20") in t and (rep, b, c, "17") in t]
    med[rep] = statistics.median(r) if len(r) >= 40 else 9
worst = 0
for b, c in pts:
    try:
        r = min(t[(a, b, c, "20")] for a in "01") / min(t[(a, b, c, "17")] for a in "01")
    except KeyError:
        r = 9
    worst = max(worst, r)
print(1 if med["0"] < 1 and med["1"] < 1 and worst <= 1 / 0.97 else 0, "median per rep %.3f %.3f worst point %.3f n %d" % (med["0"], med["1"], worst, len(pts)))
PY
)
  echo "gate t(20)/t(17) (m 1-8, 7 shapes): $GATE"; GATE=${GATE%% *}; [ $TESTS_OK = 1 ] || GATE=0
  for k in w4a16_decode_kernelILi8ELi2ELi1E w4a16_decode3_kernelILi8E w4a16_decode3_kernelILi16E w4a16_decode3_kernelILi32E; do
    cuobjdump --dump-sass "$BIN/bench_moe" 2>/dev/null | awk -v pat="$k" '/Function : /{f=($0 ~ pat)} f' > "$OUT/sass_$k.txt"
    echo "SASS $k: $(wc -l < "$OUT/sass_$k.txt") lines, LOP3 $(grep -c 'LOP3' "$OUT/sass_$k.txt"), HMUL2 $(grep -c 'HMUL2' "$OUT/sass_$k.txt"), HGMMA $(grep -c 'HGMMA' "$OUT/sass_$k.txt"), WARPGROUP $(grep -c 'WARPGROUP' "$OUT/sass_$k.txt"), LDL/STL $(grep -cE 'LDL|STL' "$OUT/sass_$k.txt")"
  done
  if [ "${TABLE:-0}" = 1 ] && [ "$GATE" = 1 ]; then
    for tv in 17 20; do
      left || continue
      echo "== table sweep v$tv decode keys (m <= 32) $(el)"
      TS=$(tmo ${TABLE_DEC_S:-40})
      timeout $TS "$BIN/bench_moe" --out "$OUT/tables_dec_v$tv" --only moe_grouped_gemm_w4a16 --deadline-s $((TS > 20 ? TS - 5 : 10)) \
        --w4-variants "$tv" --w4-max-m 32 --w4-experts 8,28,24,32 --w4-max-rows 98304 > "$OUT/bench_table_dec_v$tv.txt" 2>&1
      echo "table sweep dec v$tv exit: $? $(el)"; grep -cE '"variant"' "$OUT/tables_dec_v$tv/moe_grouped_gemm_w4a16.json" 2>/dev/null
    done
  fi
  if [ $TESTS_OK = 1 ]; then
    for v in 17 20; do
      left || continue
      echo "== ncu decode v$v (K3 w13 G=8 m=8) $(el)"
      timeout $(tmo ${NCU_S:-25}) ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
        --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
        -k regex:"w4a16_decode" -c 1 "$BIN/bench_moe" --out /tmp/probe --probe --w4-variants $v > "$OUT/ncu_dec_v$v.txt" 2>&1
      echo "ncu exit: $? $(el)"
      grep -E "^\s+(Duration|SM Frequency|Issue Slots Busy|Eligible Warps|No Eligible|Executed Instructions |Registers Per|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Block Limit)" "$OUT/ncu_dec_v$v.txt" | sort -u | cut -c1-150 | head -16
    done
  fi
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done $(el)"
} 2>&1 | tee "$LOG"
(cd "$OUT" && tar -czf diag.tar.gz $(ls sass_*.txt ncu_*.txt memcheck.txt 2>/dev/null) && rm -f sass_*.txt ncu_*.txt memcheck.txt)
ls -d "$OUT"/tables_* >/dev/null 2>&1 && (cd "$OUT" && tar -czf tables.tar.gz tables_* bench_table_*.txt && rm -rf tables_* bench_table_*.txt)
echo "==== SUMMARY ===="
grep -E "^w4cmp [^r].*m=[1-8]:" "$OUT/bench_cmp.txt" 2>/dev/null | cut -c1-200
