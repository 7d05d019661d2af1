#!/usr/bin/env bash
# Device call of issue 13's w4l helper (NOTES.md §24): variant 27 = 20 with the tokens-first early prologue (EP 2: the
# producer warp issues stage 0's token rows, then the ring's weight copies, then the other ring stages' token rows, before
# the CTA barrier; kernel 27 = 17 + EP 2 at bt 8 on <= 2 CTAs per SM, kernel 28 = 20 + EP 2 on 2-3 CTAs per SM / bt 16)
# on the one-wave grids. Model: run_w4k.sh CALL=2. Every step under `timeout`, capped by GUARD_S.
#  1. test_moe W4A16Decode27.* (production-K w2 / w13 / DSV4-Pro shapes with skewed loads, short K, 40 / 70 groups, the
#     rule; traced kernel 29), PermuteTest 17 / 20 / 25 / 27 (4 shards of TEST1_S; double-precision CPU references);
#  2. w4cmp 20,25,27 (K3 / DSV4-Flash decode shapes, m 1-16, event + graph, 2 repetitions with the order alternating);
#  3. gate (w4k_gate.py CMP 27 20): over the kernel-27/28 points (K3 w2, DSV4-Flash w2, K3 w13 G 8, m 1-16) the median of
#     event t27/t20 < 1 per repetition and no point above 1/0.97; tests pass;
#  4. the per-CTA timelines: kernel 24 (= 20 traced) and kernel 29 (= 28 traced) at K3 w2 / DSV4-Flash w2 / K3 w13 G 8 m 8
#     and K3 w2 G 8 m 1 (5 launches each, fresh weights);
#  5. compute-sanitizer memcheck of W4A16Decode27.TokensFirstShortKAndRule + PermuteTest 27;
#  6. only after a passed gate: the whole-layer tables under 27 and the G-8 decode keys (m 1-16) of moe_grouped_gemm_w4a16
#     under 27 then 20 (same-run reference).
# CALL=2 (diagnosis after the failed gate: which part of the early prologue costs the time): test W4A16Decode27.TracedKernel29
# (kernels 29 / 30 / 31), w4cmp 21,24,29,30,31 (K3 / DSV4-Flash, m 1-8; 21 = kernel 20 untraced, 24 = 20 traced, 29 = EP 2
# traced, 30 = only EP's one-round lookup, 31 = only the tokens-first pre-issue; all kernel-20 form at bt 8) and the
# timelines of 24 / 29 / 30 / 31 at the G 8 points.
# Reproduce: OUT=/tmp/out BIN=<dir with test_moe, bench_moe (or .gz)> [CALL=2] bash kernels/moe/run_w4l.sh
set -u
CALL=${CALL:-1}
BIN=${BIN:-build-carry/w4l}; OUT=${OUT:-/tmp/w4l-out}; GUARD_S=${GUARD_S:-300}
T0=$(date +%s)
LOG=$OUT/log.txt
mkdir -p "$OUT"
for f in test_moe bench_moe; do [ -f "$BIN/$f" ] || { gunzip -c "$BIN/$f.gz" > "/tmp/$f" && chmod +x "/tmp/$f"; }; done
[ -f "$BIN/test_moe" ] || BIN=/tmp
el() { echo "($(($(date +%s)-T0)) s)"; }
left() { [ $(($(date +%s)-T0)) -lt "$GUARD_S" ]; }
tmo() { local r=$((GUARD_S - ($(date +%s)-T0))); [ $r -lt 1 ] && r=1; [ "$1" -lt $r ] && echo "$1" || echo $r; }
HERE=$(cd "$(dirname "$0")" && pwd)
{
  echo "== run_w4l.sh commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ) guard ${GUARD_S} s"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  if [ "$CALL" = 2 ]; then
    timeout $(tmo 60) "$BIN/test_moe" --gtest_filter='W4A16Decode27.TracedKernel29' > "$OUT/test.txt" 2>&1; echo "test exit $? $(el)"
    grep -E "^\[  (PASSED|FAILED)|Failure|w4a16 v=" "$OUT/test.txt" | cut -c1-200 | head -12
    B=$(tmo 60)
    timeout $B "$BIN/bench_moe" --out /tmp/w4l_cmp --only w4cmp --w4-max-m 8 --deadline-s $((B > 20 ? B - 6 : 10)) \
      --w4-variants 21,24,29,30,31 --models K3,DSV4-Flash > "$OUT/bench_cmp.txt" 2>&1
    echo "bench w4cmp exit: $? $(el)"
    for nv in 29 30 31; do echo "t($nv)/t(24): $(python3 "$HERE/w4k_gate.py" "$OUT/bench_cmp.txt" $nv 24 | cut -c1-420)"; done
    echo "t(24)/t(21): $(python3 "$HERE/w4k_gate.py" "$OUT/bench_cmp.txt" 24 21 | cut -c1-420)"
    for tv in 24 29 30 31; do
      left || continue
      echo "== trace (kernel $tv) $(el)"
      timeout $(tmo 30) "$BIN/bench_moe" --out "$OUT/trace$tv" --w4-variants 20 --probe-variants $tv --probe-reps 5 \
        --probe-shapes K3:w2:8:8,DSV4-Flash:w2:8:8,K3:w13:8:8,K3:w2:8:1 > "$OUT/trace$tv.txt" 2>&1
      echo "trace exit: $? $(el)"
      python3 "$HERE/w4k_trace.py" "$OUT"/trace$tv/trace_*.csv 2>&1 | head -40
    done
    echo "== done $(el)"
  else
  TESTS_OK=1
  # PermuteTest index: Values(0..8, 11..23, 25, 27) -> 15 = v17, 18 = v20, 22 = v25, 23 = v27
  P=Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute
  F1=${F1:-"W4A16Decode27.*:$P/15:$P/18:$P/22:$P/23"}
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
  echo "max rel L2 per variant (bt):"; awk '/w4a16 v=/{v="";b="";for(i=1;i<=NF;i++){if($i~/^v=/){split($i,a,"=");v=a[2]} if($i~/^bt=/){split($i,a,"=");b=a[2]; sub(/:$/,"",b)}}; k="v" v " bt " b; e=$NF+0; if (e>m[k]) m[k]=e; n[k]++} END{for (k in m) print "  " k ": " n[k] " checks, max " m[k]}' "$OUT/test.txt" | sort -V
  GATE=0
  if left; then
    echo "== w4cmp 20,25,27 (K3, DSV4-Flash; m 1-16) $(el)"
    B=$(tmo ${CMP_S:-60})
    timeout $B "$BIN/bench_moe" --out /tmp/w4l_cmp --only w4cmp --w4-max-m 16 --deadline-s $((B > 20 ? B - 6 : 10)) \
      --w4-variants 20,25,27 --models K3,DSV4-Flash > "$OUT/bench_cmp.txt" 2>&1
    echo "bench w4cmp exit: $? $(el)"
    GATE=$(python3 "$HERE/w4k_gate.py" "$OUT/bench_cmp.txt" 27 20)
    echo "gate t(27)/t(20): $GATE"; GATE=${GATE%% *}; [ $TESTS_OK = 1 ] || GATE=0
    echo "t(27)/t(25): $(python3 "$HERE/w4k_gate.py" "$OUT/bench_cmp.txt" 27 25)"
    echo "GATE=$GATE"
  fi
  for tv in 24 29; do
    left || continue
    echo "== trace (kernel $tv) $(el)"
    timeout $(tmo 30) "$BIN/bench_moe" --out "$OUT/trace$tv" --w4-variants 20 --probe-variants $tv --probe-reps 5 \
      --probe-shapes K3:w2:8:8,DSV4-Flash:w2:8:8,K3:w13:8:8,K3:w2:8:1 > "$OUT/trace$tv.txt" 2>&1
    echo "trace exit: $? $(el)"; grep -E "^trace .*rep=(4)" "$OUT/trace$tv.txt" | cut -c1-300
    python3 "$HERE/w4k_trace.py" "$OUT"/trace$tv/trace_*.csv 2>&1 | head -40
  done
  if [ $TESTS_OK = 1 ] && left; then
    F2=${F2:-"W4A16Decode27.TokensFirstShortKAndRule:$P/23"}
    echo "== memcheck $F2 $(el)"
    timeout $(tmo ${MEMCHECK_S:-60}) compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_moe" --gtest_filter="$F2" > "$OUT/memcheck.txt" 2>&1
    echo "memcheck exit $? $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | head -4
    echo "memcheck checks: $(grep -cE 'w4a16 v=' "$OUT/memcheck.txt")"
  fi
  if [ "$GATE" = 1 ] || [ "${FORCE_TABLES:-0}" = 1 ]; then
    if left; then
      echo "== whole-layer tables, variant 27 $(el)"
      TS=$(tmo ${LAYER_S:-80})
      timeout $TS "$BIN/bench_moe" --out "$OUT/tables_layers" --only moe_layer_k3,moe_layer_dsv4 --w4-variants 27 \
        --deadline-s $((TS > 15 ? TS - 5 : 10)) > "$OUT/bench_layers.txt" 2>&1
      echo "layers exit: $? $(el)"; grep -E "section|SKIPPED" "$OUT/bench_layers.txt" | head -5
    fi
    for tv in 27 20; do
      left || continue
      echo "== table sweep v$tv G-8 decode keys (m 1-16) $(el)"
      TS=$(tmo ${TABLE_DEC_S:-30})
      timeout $TS "$BIN/bench_moe" --out "$OUT/tables_dec_v$tv" --only moe_grouped_gemm_w4a16 --deadline-s $((TS > 15 ? TS - 4 : 10)) \
        --w4-variants "$tv" --w4-min-m 1 --w4-max-m 16 --w4-experts 8 --w4-max-rows 98304 > "$OUT/bench_table_dec_v$tv.txt" 2>&1
      echo "table sweep dec v$tv exit: $? $(el)"; grep -cE '"variant"' "$OUT/tables_dec_v$tv/moe_grouped_gemm_w4a16.json" 2>/dev/null
    done
  fi
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done $(el)"
  fi
} 2>&1 | tee "$LOG"
(cd "$OUT" && ls trace[23]?/*.csv >/dev/null 2>&1 && tar -czf trace.tar.gz trace[23]? && rm -rf trace[23]?)
(cd "$OUT" && ls -d tables_* >/dev/null 2>&1 && tar -czf tables.tar.gz tables_* bench_table_*.txt bench_layers.txt 2>/dev/null && rm -rf tables_* bench_table_*.txt)
[ -f "$OUT/memcheck.txt" ] && gzip -f "$OUT/memcheck.txt"
ls -la "$OUT"
