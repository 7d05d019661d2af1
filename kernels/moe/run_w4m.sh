#!/usr/bin/env bash
# Device call of issue 13's w4m helper (NOTES.md §25): programmatic dependent launch (PDL) for the W4A16 decode kernels.
# Variant 32 = 20 with kernel 17 / 20 in their PD 2 form (kernels 32 / 33: trigger at the start, routing + first ring of
# weights before griddepcontrol.wait, tokens after), variant 34 = PD 1 (kernels 34 / 35: trigger + wait before any global
# read), both launched with cudaLaunchAttributeProgrammaticStreamSerialization. Model: run_w4l.sh. Every step under
# `timeout`, capped by GUARD_S.
#  1. test_moe W4A16Decode32.* (w13 -> w2 -> x chains with PDL, run twice back to back without a sync, every stage vs a
#     double CPU reference from its device input; production K, skewed loads, partial tiles, 40 / 70 groups) and
#     PermuteTest 20 / 32 / 34 (4 shards of TEST1_S);
#  2. compute-sanitizer memcheck of W4A16Decode32.PdlChainShortK;
#  3. bench_moe --only w4pdl --w4-variants 20,32,34 (K3 / DSV4-Flash w13, w2 G 8 / 32, m 1-16: repeated w13, repeated
#     w2, the chain w13 -> w2; per call over 20 back-to-back calls, stream events and graph; 2 reps, order alternating);
#  4. gate (w4m_gate.py).
# Reproduce: OUT=/tmp/out BIN=<dir with test_moe, bench_moe (or .gz)> bash kernels/moe/run_w4m.sh
set -u
BIN=${BIN:-build-carry/w4m}; OUT=${OUT:-/tmp/w4m-out}; GUARD_S=${GUARD_S:-220}
T0=$(date +%s)
LOG=$OUT/log.txt
mkdir -p "$OUT"
# (call 1: the tree + carry limit: test_moe / bench_moe relinked against one libmoe_kernels.so of build-w4g's objects, xz)
if [ -f "$BIN/libmoe_kernels.so.xz" ]; then xz -dc "$BIN/libmoe_kernels.so.xz" > /tmp/libmoe_kernels.so; export LD_LIBRARY_PATH=/tmp:${LD_LIBRARY_PATH:-}; fi
for f in test_moe bench_moe; do
  [ -f "$BIN/$f" ] && continue
  if [ -f "$BIN/$f.xz" ]; then xz -dc "$BIN/$f.xz" > "/tmp/$f"; else gunzip -c "$BIN/$f.gz" > "/tmp/$f"; fi
  chmod +x "/tmp/$f"
done
[ -f "$BIN/test_moe" ] || BIN=/tmp
el() { echo "($(($(date +%s)-T0)) s)"; }
left() { [ $(($(date +%s)-T0)) -lt "$GUARD_S" ]; }
tmo() { local r=$((GUARD_S - ($(date +%s)-T0))); [ $r -lt 1 ] && r=1; [ "$1" -lt $r ] && echo "$1" || echo $r; }
HERE=$(cd "$(dirname "$0")" && pwd)
{
  echo "== run_w4m.sh commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ) guard ${GUARD_S} s"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  TESTS_OK=1
  # PermuteTest index: Values(0..8, 11..23, 25, 27, 32, 34) -> 18 = v20, 24 = v32, 25 = v34
  P=Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute
  F1=${F1:-"W4A16Decode32.*:$P/18:$P/24:$P/25"}
  echo "== tests (4 shards) $F1 $(el)"
  pids=()
  for i in 0 1 2 3; do
    GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout $(tmo ${TEST1_S:-90}) "$BIN/test_moe" --gtest_filter="$F1" > "$OUT/test_$i.txt" 2>&1 &
    pids+=($!)
  done
  for i in 0 1 2 3; do wait "${pids[$i]}" || { echo "test shard $i exit $?"; TESTS_OK=0; }; done
  cat "$OUT"/test_?.txt > "$OUT/test.txt"; rm -f "$OUT"/test_?.txt
  echo "tests done, ok=$TESTS_OK $(el)"
  grep -E "^\[  (PASSED|FAILED)|^\[       OK|Failure" "$OUT/test.txt" | cut -c1-200 | head -20
  grep -E "pdl chain|w4a16 v=" "$OUT/test.txt" | cut -c1-160 | head -60
  if left; then
    F2=${F2:-"W4A16Decode32.PdlChainShortK"}
    echo "== memcheck $F2 $(el)"
    timeout $(tmo ${MEMCHECK_S:-60}) compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_moe" --gtest_filter="$F2" > "$OUT/memcheck.txt" 2>&1
    echo "memcheck exit $? $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | head -4
    echo "memcheck checks: $(grep -cE 'pdl chain' "$OUT/memcheck.txt")"
  fi
  if left; then
    echo "== w4pdl 20,32,34 (K3, DSV4-Flash; m 1-16) $(el)"
    B=$(tmo ${CMP_S:-100})
    timeout $B "$BIN/bench_moe" --out /tmp/w4m_pdl --only w4pdl --w4-max-m 16 --deadline-s $((B > 20 ? B - 8 : 10)) \
      --w4-variants ${VS:-20,32,34} --models K3,DSV4-Flash > "$OUT/bench_pdl.txt" 2>&1
    echo "bench w4pdl exit: $? $(el)"; grep -E "ERROR|SKIPPED|section" "$OUT/bench_pdl.txt" | head -5
    for nv in 32 34; do echo "== gate t($nv)/t(20)"; python3 "$HERE/w4m_gate.py" "$OUT/bench_pdl.txt" $nv 20; done
  fi
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done $(el)"
} 2>&1 | tee "$LOG"
[ -f "$OUT/memcheck.txt" ] && gzip -f "$OUT/memcheck.txt"
ls -la "$OUT"
