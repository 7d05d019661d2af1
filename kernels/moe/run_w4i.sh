#!/usr/bin/env bash
# Device calls of issue 13's w4i helper (NOTES.md §21): kernel 20 at bt 32 (m 17-32 rows per expert), built for 2 CTAs per
# SM (kD3MinBlocks<32> = 2: __launch_bounds__(288, 2), 6 stages; ptxas 92 registers, 0 spills, no C7512; built for 3
# CTAs per SM it was C7512-serialised and 1.07-1.19x kernel 17, §19). Variant 21 = kernel 20 at every bt 8 / 16 / 32 grid
# (opt-in). Model: run_w4h.sh. Every step under `timeout`, capped by a global guard (GUARD_S).
# CALL=1:
#  1. test_moe, the W4A16 suites that cover the decode kernels (MoeHost, AllTiles, PermuteDequant, W4A16Dequant,
#     W4A16Decode17, W4A16Decode20, PermuteTest, W4A16StreamK), in SHARDS parallel gtest shards (CPU references);
#  2. compute-sanitizer memcheck of the kernel-20 bt-32 tests (W4A16Decode17/20.*, PermuteDequant 21 at bt 32,
#     PermuteTest 21), 2 shards;
#  3. SASS of kernel 20 at BT 8 / 16 / 32: is every F2FP (accumulator read) after the WARPGROUP.DEPBAR.LE gsb0, 0x0?
#  4. `bench_moe --only w4cmp --w4-max-m 32 --w4-variants 17,20,21` (the 7 decode shapes, m 1..32, order alternating
#     between the 2 repetitions);
#  5. gate (bt 32): tests + memcheck pass, per repetition the median over the 7 shapes x m 17-32 of event t(21)/t(17) < 1,
#     and at every one of those points min-over-repetitions t(21)/t(17) <= 1/0.97.
# CALL=2 (the new default 20 = kernel 20 at bt 32 too): the whole-layer tables (`--only moe_layer_k3,moe_layer_dsv4
#  --w4-variants 20`), then the bt-32 decode keys of moe_grouped_gemm_w4a16 (m 17-32, G 8 / 24 / 28 / 32) swept under 20
#  and then under 17 (same-run reference), then (TESTS_LAST=1) the decode suites under the new default.
# Call 1 ran (d18abf2; results/w4i/call1_*): correct, but t(21)/t(17) at m 17-32 median 1.014 / 1.013, worst 1.048: gate
# FAILED, so CALL=2 (which needs variant 20 switched to kernel 20 at bt 32) was not run (NOTES.md §21).
# Reproduce: OUT=/tmp/out BIN=<dir with test_moe, bench_moe> CALL=1 bash kernels/moe/run_w4i.sh
set -u
BIN=${BIN:-build-carry/w4i}; OUT=${OUT:-/tmp/w4i-out}; GUARD_S=${GUARD_S:-200}; SHARDS=${SHARDS:-4}; CALL=${CALL:-1}
T0=$(date +%s)
LOG=$OUT/log.txt
mkdir -p "$OUT"
for f in test_moe bench_moe; do [ -f "$BIN/$f" ] || { gunzip -c "$BIN/$f.gz" > "/tmp/$f" && chmod +x "/tmp/$f"; }; done
[ -f "$BIN/test_moe" ] || BIN=/tmp
el() { echo "($(($(date +%s)-T0)) s)"; }
left() { [ $(($(date +%s)-T0)) -lt "$GUARD_S" ]; }
tmo() { local r=$((GUARD_S - ($(date +%s)-T0))); [ $r -lt 1 ] && r=1; [ "$1" -lt $r ] && echo "$1" || echo $r; }
# sharded gtest run: shards NAME FILTER N TIMEOUT [prefix command...]
shards() {
  local name=$1 filt=$2 n=$3 t=$4; shift 4
  local pids=() rc=0 i
  for i in $(seq 0 $((n - 1))); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "$t" "$@" "$BIN/test_moe" --gtest_filter="$filt" > "$OUT/${name}_$i.txt" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || { echo "$name shard $i exit $?"; rc=1; }; done
  cat "$OUT/${name}"_*.txt > "$OUT/$name.txt"; rm -f "$OUT/${name}"_*.txt
  return $rc
}
{
  echo "== run_w4i.sh CALL=$CALL commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ) guard ${GUARD_S} s"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  TESTS_OK=1
  # PermuteDequant index = bt index x 5 + (17..21 -> 0..4): 3 / 4 = 20 / 21 at bt 8, 8 / 9 at bt 16, 13 / 14 at bt 32;
  # PermuteTest 18 / 19 = 20 / 21
  if [ "$CALL" = 1 ]; then
    F1=${F1:-'MoeHost.*:AllTiles/W4A16Test*:PermuteDequant/*:W4A16Dequant.*:W4A16Decode17.*:W4A16Decode20.*:Variants/W4A16PermuteTest*:W4A16StreamK.*'}
  else
    F1=${F1:-'MoeHost.*:PermuteDequant/*:W4A16Dequant.*:W4A16Decode17.*:W4A16Decode20.*:Variants/W4A16PermuteTest*'}
  fi
  F2=${F2:-'W4A16Decode17.*:W4A16Decode20.*:PermuteDequant/W4A16Test.MatchesDoubleReference/13:PermuteDequant/W4A16Test.MatchesDoubleReference/14:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/18:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/19'}
  run_tests() {
  echo "== tests ($SHARDS shards) $F1 $(el)"
  shards test "$F1" "$SHARDS" "$(tmo ${TEST1_S:-110})" || TESTS_OK=0
  echo "tests done, ok=$TESTS_OK $(el)"
  grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|SEED" "$OUT/test.txt" | cut -c1-200 | head -24
  echo "max rel L2 per variant (bt):"; awk '/w4a16 v=/{v="";b="";for(i=1;i<=NF;i++){if($i~/^v=/){split($i,a,"=");v=a[2]} if($i~/^bt=/){split($i,a,"=");b=a[2]; sub(/:$/,"",b)}}; k="v" v " bt " b; e=$NF+0; if (e>m[k]) m[k]=e; n[k]++} END{for (k in m) print "  " k ": " n[k] " checks, max " m[k]}' "$OUT/test.txt" | sort -V
  }
  [ "${TESTS_LAST:-0}" = 1 ] || run_tests
  if [ $TESTS_OK = 1 ] && [ "${MEMCHECK:-1}" = 1 ] && left; then
    echo "== memcheck (2 shards) $F2 $(el)"
    shards memcheck "$F2" 2 "$(tmo ${MEMCHECK_S:-80})" compute-sanitizer --tool memcheck --error-exitcode 9 || TESTS_OK=0
    echo "memcheck done, ok=$TESTS_OK $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | head -6
    echo "memcheck checks: $(grep -cE 'w4a16 v=' "$OUT/memcheck.txt")"
  fi
  for k in w4a16_decode3_kernelILi8E w4a16_decode3_kernelILi16E w4a16_decode3_kernelILi32E; do
    cuobjdump --dump-sass "$BIN/bench_moe" 2>/dev/null | awk -v pat="$k" '/Function : /{f=($0 ~ pat)} f' > "$OUT/sass_$k.txt"
    # the accumulator reads (F2FP) must all come after the last-group wait (DEPBAR.LE gsb0, 0x0)
    awk -v k="$k" '/WARPGROUP.DEPBAR.LE gsb0, 0x0/ && !d {d=NR} /F2FP/ {if (!f) f=NR; if (!d || NR < d) bad++} /HGMMA/ {h++}
      END {printf "SASS %s: %d lines, HGMMA %d, first DEPBAR.LE gsb0 0x0 at line %d, first F2FP at line %d, F2FP before it: %d -> %s\n", k, NR, h, d, f, bad, (bad || !d) ? "ACCUMULATORS READ IN FLIGHT" : "ok"}' "$OUT/sass_$k.txt"
  done
  if [ "$CALL" = 1 ] && left; then
    echo "== w4cmp 17,20,21 (7 decode shapes, m 1-32) $(el)"
    B=$(tmo ${CMP_S:-60})
    timeout $B "$BIN/bench_moe" --out /tmp/w4i_cmp --only w4cmp --w4-max-m 32 --deadline-s $((B > 20 ? B - 8 : 10)) \
      --w4-variants 17,20,21 > "$OUT/bench_cmp.txt" 2>&1
    echo "bench w4cmp exit: $? $(el)"
    grep -E "^w4cmp .*median" "$OUT/bench_cmp.txt"
    GATE=$(python3 - "$OUT/bench_cmp.txt" <<'PY'
import re, sys, statistics
t = {}
for l in open(sys.argv[1]):
    m = re.match(r"w4cmp rep=(\d) (\S+ \S+ G=\d+) m=(\d+) bt=\d+ v=(\d+): event ([\d.]+)", l)
    if m: t[(m.group(1), m.group(2), int(m.group(3)), m.group(4))] = float(m.group(5))
def gate(num, lo, hi):
    pts = sorted({(b, c) for (a, b, c, v) in t if lo <= c <= hi})
    med = {}
    for rep in "01":
        r = [t[(rep, b, c, num)] / t[(rep, b, c, "17")] for (b, c) in pts if (rep, b, c, num) in t and (rep, b, c, "17") in t]
        med[rep] = statistics.median(r) if len(r) >= 5 * len(pts) // 6 and r else 9
    worst, wp, per = 0, None, {}
    for b, c in pts:
        try:
            r = min(t[(a, b, c, num)] for a in "01") / min(t[(a, b, c, "17")] for a in "01")
        except KeyError:
            r = 9
        per.setdefault(b, []).append(r)
        if r > worst: worst, wp = r, (b, c)
    ok = med["0"] < 1 and med["1"] < 1 and worst <= 1 / 0.97
    shapes = "; ".join("%s %.3f" % (b, statistics.median(v)) for b, v in per.items())
    return ok, "v%s/v17 m %d-%d: median per rep %.3f %.3f, worst point %.3f (%s), n %d; per shape (min of reps) %s" % (
        num, lo, hi, med["0"], med["1"], worst, wp, len(pts), shapes)
ok32, s32 = gate("21", 17, 32)
_, s16 = gate("20", 9, 16)
_, s8 = gate("20", 1, 8)
_, s32b = gate("20", 17, 32)
print(1 if ok32 else 0, s32, "|", s16, "|", s8, "|", s32b)
PY
)
    echo "gate t(21)/t(17) at bt 32: $GATE"; GATE=${GATE%% *}; [ $TESTS_OK = 1 ] || GATE=0
    echo "GATE=$GATE"
  fi
  if [ "$CALL" = 2 ]; then
    if left; then
      echo "== whole-layer tables, default 20 $(el)"
      TS=$(tmo ${LAYER_S:-70})
      timeout $TS "$BIN/bench_moe" --out "$OUT/tables_layers" --only moe_layer_k3,moe_layer_dsv4 --w4-variants 20 \
        --deadline-s $((TS > 15 ? TS - 5 : 10)) > "$OUT/bench_layers.txt" 2>&1
      echo "layers exit: $? $(el)"; grep -E "section|SKIPPED" "$OUT/bench_layers.txt" | head -5
    fi
    for tv in ${SWEEP_VARIANTS:-20 17}; do
      left || continue
      echo "== table sweep v$tv bt-32 decode keys (m ${MINM:-16}-32; m 16: its bt-32 alt rows) $(el)"
      TS=$(tmo ${TABLE_DEC_S:-30})
      timeout $TS "$BIN/bench_moe" --out "$OUT/tables_dec_v$tv" --only moe_grouped_gemm_w4a16 --deadline-s $((TS > 15 ? TS - 4 : 10)) \
        --w4-variants "$tv" --w4-min-m ${MINM:-16} --w4-max-m 32 --w4-experts 8,28,24,32 --w4-max-rows 98304 > "$OUT/bench_table_dec_v$tv.txt" 2>&1
      echo "table sweep dec v$tv exit: $? $(el)"; grep -cE '"variant"' "$OUT/tables_dec_v$tv/moe_grouped_gemm_w4a16.json" 2>/dev/null
    done
  fi
  [ "${TESTS_LAST:-0}" = 1 ] && run_tests
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done $(el)"
} 2>&1 | tee "$LOG"
(cd "$OUT" && tar -czf diag.tar.gz $(ls sass_*.txt memcheck.txt 2>/dev/null) && rm -f sass_*.txt memcheck.txt)
ls -d "$OUT"/tables_* >/dev/null 2>&1 && (cd "$OUT" && tar -czf tables.tar.gz tables_* bench_table_*.txt 2>/dev/null; rm -rf tables_dec_* bench_table_*.txt)
echo "==== SUMMARY ===="
grep -E "^w4cmp [^r].*m=(1[7-9]|2[0-9]|3[0-2]):" "$OUT/bench_cmp.txt" 2>/dev/null | cut -c1-260
