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
# Reproduce: OUT=/tmp/out BIN=<dir with test_moe, bench_moe (or .gz)> CALL=1 bash kernels/moe/run_w4k.sh
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
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done $(el)"
} 2>&1 | tee "$LOG"
(cd "$OUT" && ls trace/*.csv >/dev/null 2>&1 && tar -czf trace.tar.gz trace && rm -rf trace)
(cd "$OUT" && ls ncu_g8_* >/dev/null 2>&1 && gzip -f ncu_g8_raw.csv ncu_g8_src.csv ncu_g8_details.txt 2>/dev/null)
ls -la "$OUT"
