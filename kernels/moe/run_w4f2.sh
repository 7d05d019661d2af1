#!/usr/bin/env bash
# Second device call of issue 13's w4f helper (NOTES.md §18), after call 1 (run_w4f.sh) made kernel 17 the decode
# default: variant 17 = the new DEFAULT (kernel 17 at bt <= 32, 15's prefill kernel at bt 256), 18 = 17 with kernel 18
# (15's prefill kernel with the byte permute), 19 = 17 with kernel 19 (kernel 17 with one E8M0 factor register per
# scale pair, broadcast in the HMUL2). Every step under `timeout`, capped by a global guard (GUARD_S):
#  1. test_moe: the W4A16 suites under the new default (MoeHost, AllTiles, PrefillForms, PermuteDequant (17-19),
#     W4A16Dequant (bit-exact old vs both new forms), W4A16Decode17 (17, 19), PermuteTest (all), W4A16Prefill.*, StreamK);
#  2. compute-sanitizer memcheck of the tests of 17-19;
#  3. `bench_moe --only w4cmp --w4-max-m 64 --w4-variants 15,17,19` (all 7 decode shapes; the order rotates between
#     the 2 repetitions);
#  4. (TABLE=1, tests + memcheck passed, 19 faster than 17 in both repetitions: median over the 4 K3 shapes x m 1-8)
#     the moe_grouped_gemm_w4a16 decode sweeps (m <= 32) of 17 then 19;
#  5. SASS mix of kernels 17 / 19 (bt 8); ncu of the decode kernel of 19 (K3 w13 G=8 m=8).
# Reproduce: OUT=/tmp/out BIN=build-carry/w4f TABLE=1 bash kernels/moe/run_w4f2.sh
set -u
BIN=${BIN:-build-carry/w4f}; OUT=${OUT:-/tmp/w4f2-out}; GUARD_S=${GUARD_S:-300}
T0=$(date +%s)
LOG=$OUT/log.txt
mkdir -p "$OUT"
el() { echo "($(($(date +%s)-T0)) s)"; }
left() { [ $(($(date +%s)-T0)) -lt "$GUARD_S" ]; }
tmo() { local r=$((GUARD_S - ($(date +%s)-T0))); [ $r -lt 1 ] && r=1; [ "$1" -lt $r ] && echo "$1" || echo $r; }
{
  echo "== run_w4f2.sh commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ) guard ${GUARD_S} s"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  TESTS_OK=1
  echo "== tests (W4A16 suites, default 17) $(el)"
  timeout $(tmo ${TEST1_S:-150}) "$BIN/test_moe" --gtest_filter='MoeHost.*:AllTiles/W4A16Test*:PrefillForms/W4A16Test*:PermuteDequant/*:W4A16Dequant.*:W4A16Decode17.*:Variants/W4A16PermuteTest*:W4A16Prefill.*:W4A16StreamK.*' > "$OUT/test.txt" 2>&1
  rc=$?; echo "test_moe exit: $rc $(el)"; [ $rc = 0 ] || TESTS_OK=0
  grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|SEED|dequant_word_p" "$OUT/test.txt" | cut -c1-200 | head -20
  echo "max rel L2 per variant:"; awk '/w4a16 v=/{for(i=1;i<=NF;i++) if ($i ~ /^v=/) {split($i,a,"="); v=a[2]}; e=$NF+0; if (e>m[v]) m[v]=e; n[v]++} END{for (v in m) print "  v" v ": " n[v] " checks, max " m[v]}' "$OUT/test.txt"
  if [ $TESTS_OK = 1 ] && left; then
    echo "== memcheck (tests of 17-19) $(el)"
    # PermuteTest index: Values(0..8, 11..19) -> 15 = v17, 16 = v18, 17 = v19
    timeout $(tmo ${MEMCHECK_S:-80}) compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_moe" \
      --gtest_filter='W4A16Dequant.*:W4A16Decode17.*:PermuteDequant/*:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/15:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/16:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/17' > "$OUT/memcheck.txt" 2>&1
    rc=$?; echo "memcheck exit: $rc $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | head -5
    echo "memcheck checks: $(grep -cE 'w4a16 v=|dequant_word_p' "$OUT/memcheck.txt")"
    [ $rc = 0 ] || TESTS_OK=0
  fi
  if left; then
    echo "== w4cmp 15,17,19 (all decode shapes, m <= 64) $(el)"
    B=$(tmo ${CMP_S:-60})
    timeout $B "$BIN/bench_moe" --out /tmp/w4f2_cmp --only w4cmp --w4-max-m 64 --deadline-s $((B > 20 ? B - 8 : 10)) \
      --w4-variants 15,17,19 > "$OUT/bench_cmp.txt" 2>&1
    echo "bench w4cmp exit: $? $(el)"
  fi
  WIN=$(python3 - "$OUT/bench_cmp.txt" <<'PY'
import re, sys, statistics
t = {}
for l in open(sys.argv[1]):
    m = re.match(r"w4cmp rep=(\d) (\S+ \S+ G=\d+) m=(\d+) bt=\d+ v=(\d+): event ([\d.]+) us \([\d.]+ TB/s\), graph ([\d.]+)", l)
    if m: t[(m.group(1), m.group(2), int(m.group(3)), m.group(4))] = (float(m.group(5)), float(m.group(6)))
out = []
def med(rep, a, b, mmax, K3only, gi=0):
    r = [t[(x, s, m, a)][gi] / t[(x, s, m, b)][gi] for (x, s, m, v) in t if x == rep and v == b and m <= mmax and (a, ) and (x, s, m, a) in t and (not K3only or s.startswith("K3"))]
    return (statistics.median(r), len(r)) if r else (9, 0)
for a, b in (("17", "15"), ("19", "15"), ("19", "17")):
    for rep in "01":
        e, n = med(rep, a, b, 8, True); g, _ = med(rep, a, b, 8, True, 1); ea, na = med(rep, a, b, 8, False)
        out.append("t(v%s)/t(v%s) rep %s: K3 m 1-8 event %.3f graph %.3f (%d points); all shapes m 1-8 event %.3f (%d)" % (a, b, rep, e, g, n, ea, na))
w = all(med(rep, "19", "17", 8, True)[0] < 1 and med(rep, "19", "17", 8, True)[1] >= 16 for rep in "01")
print(1 if w else 0)
print("\n".join(out))
PY
)
  echo "$WIN" | tail -n +2; WIN=$(echo "$WIN" | head -1); echo "19 beats 17 (both repetitions): $WIN"
  for k in w4a16_decode_kernelILi8ELi2ELi1E w4a16_decode_kernelILi8ELi2ELi2E; do
    cuobjdump --dump-sass "$BIN/bench_moe" 2>/dev/null | awk -v pat="$k" '/Function : /{f=($0 ~ pat)} f' > "$OUT/sass_$k.txt"
    echo "SASS $k: $(wc -l < "$OUT/sass_$k.txt") lines, LOP3 $(grep -c 'LOP3' "$OUT/sass_$k.txt"), SHF $(grep -c ' SHF' "$OUT/sass_$k.txt"), IMAD.SHL $(grep -c 'IMAD.SHL' "$OUT/sass_$k.txt"), IMAD $(grep -cE 'IMAD[ .]' "$OUT/sass_$k.txt"), PRMT $(grep -c 'PRMT' "$OUT/sass_$k.txt"), HMUL2 $(grep -c 'HMUL2' "$OUT/sass_$k.txt"), HFMA2 $(grep -c 'HFMA2' "$OUT/sass_$k.txt"), H0_H0/H1_H1 $(grep -cE 'H0_H0|H1_H1' "$OUT/sass_$k.txt"), LDL/STL $(grep -cE 'LDL|STL' "$OUT/sass_$k.txt")"
  done
  if [ "${TABLE:-0}" = 1 ] && [ $TESTS_OK = 1 ] && [ "$WIN" = 1 ]; then
    for tv in 17 19; do
      left || { echo "guard: table sweep v$tv skipped"; continue; }
      echo "== table sweep v$tv decode keys (m <= 32) $(el)"
      TS=$(tmo ${TABLE_DEC_S:-40})
      timeout $TS "$BIN/bench_moe" --out "$OUT/tables_dec_v$tv" --only moe_grouped_gemm_w4a16 --deadline-s $((TS > 20 ? TS - 5 : 10)) \
        --w4-variants "$tv" --w4-max-m 32 --w4-experts 8,28,24,32 --w4-max-rows 98304 > "$OUT/bench_table_dec_v$tv.txt" 2>&1
      echo "table sweep dec v$tv exit: $? $(el)"; grep -cE '"variant"' "$OUT/tables_dec_v$tv/moe_grouped_gemm_w4a16.json" 2>/dev/null
    done
  fi
  if [ $TESTS_OK = 1 ] && left; then
    for v in 19; do
      echo "== ncu decode v$v (K3 w13 G=8 m=8) $(el)"
      timeout $(tmo ${NCU_S:-25}) ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
        --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
        -k regex:"w4a16_decode" -c 1 "$BIN/bench_moe" --out /tmp/probe --probe --w4-variants $v > "$OUT/ncu_dec_v$v.txt" 2>&1
      echo "ncu exit: $? $(el)"
      grep -E "^\s+(Duration|SM Frequency|Issue Slots Busy|Eligible Warps|No Eligible|Executed Instructions |Registers Per|DRAM Throughput|Achieved Occupancy)" "$OUT/ncu_dec_v$v.txt" | sort -u | cut -c1-150 | head -12
    done
  fi
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done $(el)"
} 2>&1 | tee "$LOG"
(cd "$OUT" && tar -czf diag.tar.gz $(ls sass_*.txt ncu_*.txt memcheck.txt 2>/dev/null) && rm -f sass_*.txt ncu_*.txt memcheck.txt)
ls -d "$OUT"/tables_* >/dev/null 2>&1 && (cd "$OUT" && tar -czf tables.tar.gz tables_* bench_table_*.txt && rm -rf tables_* bench_table_*.txt)
echo "==== SUMMARY ===="
grep -E "^w4cmp .*median" "$OUT/bench_cmp.txt" 2>/dev/null | sort -u | cut -c1-260
