#!/usr/bin/env bash
# Device calls of issue 13's w4k helper (NOTES.md §23): where the time of the one-wave w2 G = 8 W4A16 decode grids goes.
# Model: run_w4j.sh / run_w4g.sh. Every step under `timeout`, capped by GUARD_S.
# CALL=1 (diagnosis):
#  1. the per-CTA timeline of kernel 24 (= kernel 20 writing smid, globaltimer and clock64 at entry, first bulk-copy
#     issue, first full barrier, loop end, exit; bench_moe --probe-shapes ... --probe-variants 24, 5 launches per point,
#     each on a fresh weight set): CTAs per SM, prologue, per-stage time, tail;
#  2. w4cmp 20,21,24 (K3 / DSV4-Flash decode shapes, m 1-8, event + 20-call graph): 20 = kernel 17 on the w2 G 8 grids,
#     21 = kernel 20 everywhere, 24 = 21 traced (the trace's cost);
#  3. ncu (--set full + per-SM min / max metrics, --clock-control none, one launch each) of kernel 17 (variant 17) and
#     kernel 20 (variant 21) at K3 w2 G 8 m 8, DSV4-Flash w2 G 8 m 8 and K3 w13 G 8 m 8: details, raw csv, SASS source
#     counters (stall samples per instruction).
# CALL=2 (variant 25 = 20 with the early prologue, kernels 25 / 26, on one-wave grids):
#  1. test_moe MoeHost, W4A16Decode17 / 20 / 25, PermuteTest 17 / 20 / 25 (4 shards; double-precision CPU references),
#     compute-sanitizer memcheck of W4A16Decode25.* and PermuteTest 25;
#  2. w4cmp 20,25 (K3 / DSV4-Flash decode shapes, m 1-16, event + graph, 2 repetitions with the order alternating);
#  3. gate (w4k_gate.py): over the points where 25 runs kernel 25 / 26 (K3 w2, DSV4-Flash w2, K3 w13 G 8, m 1-16), per
#     repetition the median of event t25/t20 < 1 and at every such point min-over-reps t25/t20 <= 1/0.97; tests pass;
#  4. only after a passed gate: the whole-layer tables under 25 and the G-8 decode keys (m 1-16) of
#     moe_grouped_gemm_w4a16 under 25 then 20 (same-run reference).
# Ran: call 1 (6a164d1, GUARD 220; NOTES.md §23), call 2 (9af83fc, GUARD 88 MEMCHECK_LAST=1 TEST1_S=30 CMP_S=25: the shards
# holding W4A16Decode17 / 25 hit the 30 s shard timeout; variant 25 1.03-1.14x variant 20: gate FAILED, no tables, no memcheck).
# Reproduce: OUT=/tmp/out BIN=<dir with test_moe, bench_moe (or .gz)> CALL=1|2 bash kernels/moe/run_w4k.sh
set -u
BIN=${BIN:-build-carry/w4k}; OUT=${OUT:-/tmp/w4k-out}; GUARD_S=${GUARD_S:-220}; CALL=${CALL:-1}
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
  echo "== run_w4k.sh CALL=$CALL commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ) guard ${GUARD_S} s"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  ncu --version | tail -1
  if [ "$CALL" = 1 ]; then
    echo "== trace (kernel 24) $(el)"
    timeout $(tmo 40) "$BIN/bench_moe" --out "$OUT/trace" --w4-variants 20 --probe-variants 24 --probe-reps 5 \
      --probe-shapes ${TRACE_SHAPES:-K3:w2:8:8,DSV4-Flash:w2:8:8,K3:w13:8:8,K3:w2:8:1,K3:w2:32:8,DSV4-Flash:w2:32:8} > "$OUT/trace.txt" 2>&1
    echo "trace exit: $? $(el)"; grep -E "^trace .*rep=(0|4)" "$OUT/trace.txt" | cut -c1-260
    python3 "$HERE/w4k_trace.py" "$OUT"/trace/trace_*.csv 2>&1 | head -60
    if left; then
      echo "== w4cmp ${CMP_V:-20,21,24} m 1-${CMP_MAXM:-8} $(el)"
      B=$(tmo ${CMP_S:-70})
      timeout $B "$BIN/bench_moe" --out /tmp/w4k_cmp --only w4cmp --w4-max-m ${CMP_MAXM:-8} --deadline-s $((B > 20 ? B - 8 : 10)) \
        --w4-variants ${CMP_V:-20,21,24} --models ${CMP_MODELS:-K3,DSV4-Flash} > "$OUT/bench_cmp.txt" 2>&1
      echo "bench w4cmp exit: $? $(el)"
      grep -E "^w4cmp [^r].*m=(1|8):" "$OUT/bench_cmp.txt" | cut -c1-240
    fi
    if left; then
      echo "== ncu kernels 17 / 20 at K3 w2, DSV4-Flash w2, K3 w13 G 8 m 8 $(el)"
      NCUM=sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,sm__cycles_elapsed.max,sm__ctas_launched.min,sm__ctas_launched.max,sm__ctas_launched.sum,gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active
      timeout $(tmo ${NCU_S:-150}) ncu --clock-control none --set full --import-source no --metrics $NCUM -k regex:w4a16_decode -c 6 \
        -o "$OUT/ncu_g8" -f "$BIN/bench_moe" --out /tmp/w4k_probe --w4-variants 20 --probe-variants 17,21 \
        --probe-shapes K3:w2:8:8,DSV4-Flash:w2:8:8,K3:w13:8:8 > "$OUT/ncu_g8.log" 2>&1
      echo "ncu exit: $? $(el)"; tail -3 "$OUT/ncu_g8.log"
      if [ -f "$OUT/ncu_g8.ncu-rep" ]; then
        ncu -i "$OUT/ncu_g8.ncu-rep" --page details --print-details all > "$OUT/ncu_g8_details.txt" 2>&1
        ncu -i "$OUT/ncu_g8.ncu-rep" --page raw --csv > "$OUT/ncu_g8_raw.csv" 2>&1
        timeout $(tmo 40) ncu -i "$OUT/ncu_g8.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_g8_src.csv" 2>&1
        python3 "$HERE/w4k_ncu.py" "$OUT/ncu_g8_raw.csv" 2>&1 | head -80
        echo "ncu done $(el)"
      fi
    fi
  fi
  if [ "$CALL" = 2 ]; then
    TESTS_OK=1
    # PermuteTest index: Values(0..8, 11..23, 25) -> 15 = v17, 18 = v20, 22 = v25
    F1=${F1:-'MoeHost.*:W4A16Decode17.*:W4A16Decode20.*:W4A16Decode25.*:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/15:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/18:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/22'}
    echo "== tests (4 shards) $F1 $(el)"
    pids=()
    for i in 0 1 2 3; do
      GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout $(tmo ${TEST1_S:-60}) "$BIN/test_moe" --gtest_filter="$F1" > "$OUT/test_$i.txt" 2>&1 &
      pids+=($!)
    done
    for i in 0 1 2 3; do wait "${pids[$i]}" || { echo "test shard $i exit $?"; TESTS_OK=0; }; done
    cat "$OUT"/test_?.txt > "$OUT/test.txt"; rm -f "$OUT"/test_?.txt
    echo "tests done, ok=$TESTS_OK $(el)"
    grep -E "^\[  (PASSED|FAILED)|Failure" "$OUT/test.txt" | cut -c1-200 | head -16
    echo "max rel L2 per variant (bt):"; awk '/w4a16 v=/{v="";b="";for(i=1;i<=NF;i++){if($i~/^v=/){split($i,a,"=");v=a[2]} if($i~/^bt=/){split($i,a,"=");b=a[2]; sub(/:$/,"",b)}}; k="v" v " bt " b; e=$NF+0; if (e>m[k]) m[k]=e; n[k]++} END{for (k in m) print "  " k ": " n[k] " checks, max " m[k]}' "$OUT/test.txt" | sort -V
    memcheck() {
      F2=${F2:-'W4A16Decode25.*:Variants/W4A16PermuteTest.K3ShapeAfterDevicePermute/22'}
      echo "== memcheck $F2 $(el)"
      timeout $(tmo ${MEMCHECK_S:-45}) compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_moe" --gtest_filter="$F2" > "$OUT/memcheck.txt" 2>&1
      echo "memcheck exit $? $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.txt" | head -4
      echo "memcheck checks: $(grep -cE 'w4a16 v=' "$OUT/memcheck.txt")"
    }
    # MEMCHECK_LAST=1: after the timings and tables (a short device call: correctness first, then the measurements)
    [ "${MEMCHECK_LAST:-0}" = 1 ] || { [ $TESTS_OK = 1 ] && left && memcheck; }
    GATE=0
    if left; then
      echo "== w4cmp 20,25 (K3, DSV4-Flash; m 1-16) $(el)"
      B=$(tmo ${CMP_S:-60})
      timeout $B "$BIN/bench_moe" --out /tmp/w4k_cmp --only w4cmp --w4-max-m 16 --deadline-s $((B > 20 ? B - 6 : 10)) \
        --w4-variants 20,25 --models K3,DSV4-Flash > "$OUT/bench_cmp.txt" 2>&1
      echo "bench w4cmp exit: $? $(el)"
      GATE=$(python3 "$HERE/w4k_gate.py" "$OUT/bench_cmp.txt" 25 20)
      echo "gate t(25)/t(20): $GATE"; GATE=${GATE%% *}; [ $TESTS_OK = 1 ] || GATE=0
      echo "GATE=$GATE"
    fi
    if [ "$GATE" = 1 ] || [ "${FORCE_TABLES:-0}" = 1 ]; then
      if left; then
        echo "== whole-layer tables, variant 25 $(el)"
        TS=$(tmo ${LAYER_S:-70})
        timeout $TS "$BIN/bench_moe" --out "$OUT/tables_layers" --only moe_layer_k3,moe_layer_dsv4 --w4-variants 25 \
          --deadline-s $((TS > 15 ? TS - 5 : 10)) > "$OUT/bench_layers.txt" 2>&1
        echo "layers exit: $? $(el)"; grep -E "section|SKIPPED" "$OUT/bench_layers.txt" | head -5
      fi
      for tv in 25 20; do
        left || continue
        echo "== table sweep v$tv G-8 decode keys (m 1-16) $(el)"
        TS=$(tmo ${TABLE_DEC_S:-25})
        timeout $TS "$BIN/bench_moe" --out "$OUT/tables_dec_v$tv" --only moe_grouped_gemm_w4a16 --deadline-s $((TS > 15 ? TS - 4 : 10)) \
          --w4-variants "$tv" --w4-min-m 1 --w4-max-m 16 --w4-experts 8 --w4-max-rows 98304 > "$OUT/bench_table_dec_v$tv.txt" 2>&1
        echo "table sweep dec v$tv exit: $? $(el)"; grep -cE '"variant"' "$OUT/tables_dec_v$tv/moe_grouped_gemm_w4a16.json" 2>/dev/null
      done
    fi
    [ "${MEMCHECK_LAST:-0}" = 1 ] && [ $TESTS_OK = 1 ] && left && memcheck
  fi
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done $(el)"
} 2>&1 | tee "$LOG"
(cd "$OUT" && ls trace/*.csv >/dev/null 2>&1 && tar -czf trace.tar.gz trace && rm -rf trace)
(cd "$OUT" && ls ncu_g8_* >/dev/null 2>&1 && gzip -f ncu_g8_raw.csv ncu_g8_src.csv ncu_g8_details.txt 2>/dev/null)
(cd "$OUT" && ls -d tables_* >/dev/null 2>&1 && tar -czf tables.tar.gz tables_* bench_table_*.txt bench_layers.txt 2>/dev/null && rm -rf tables_* bench_table_*.txt)
[ -f "$OUT/memcheck.txt" ] && gzip -f "$OUT/memcheck.txt"
ls -la "$OUT"
