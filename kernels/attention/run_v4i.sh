#!/usr/bin/env bash
# Issue 12, seventeenth session (helper v4i; a copy of run_v4h.sh): the staged producer on 592-B rows (ST + V16,
# V4WS_ST=1) of v4_attn_ws_kernel.
# `bash kernels/attention/run_v4i.sh carry` (here, after building test_mqa and bench_attn in build-v4f) copies the
# binaries (stripped) to the ignored build-carry/v4i; without an argument (device call, carry build-carry/v4i) it
# runs, under a global time guard GUARD (default 240 s; each phase starts only with room left and its timeout
# is clipped to what is left), in this order:
#   1. test_mqa NEW_FILTER (the ST + V16 tests, V16 tests, the pool-row and epilogue rules, NoSink);
#   2. compute-sanitizer memcheck, then synccheck, of SAN_FILTER;
#   3. bench_attn at the reference points (DEC_PTS / PRE_PTS as run_v4e.sh) under each CMP_ENV setting,
#      interleaved REPS times; best of REPS per point in cmp_table.txt;
#   4. (tests passed, SWEEP_OPS set, and SWEEP_IF >= 1.01x of the first CMP_ENV setting at CSA prefill 4096 after
#      64K) the table sweeps of SWEEP_OPS (op:seconds:share) under SWEEP_ENV, heads >= 64;
#   4b. DBG_SPLIT=1: the V4WS_DEBUG bound split (584-B form) at DBG_PT, before the sweeps;
#   5. NCU=1: one ncu (--set full) of NCU_ENV at NCU_OP / NCU_PT.
# Out: $OUT/run.log (summary), cmp_table.txt, tables.tar.gz (sweeps), logs.tar.gz (test / sanitizer / bench logs, ncu).
set -uo pipefail
if [ "${1:-}" = carry ]; then
  mkdir -p build-carry/v4i
  cp build-v4f/kernels/attention/test_mqa build-v4f/kernels/attention/bench_attn build-carry/v4i/
  strip --strip-unneeded build-carry/v4i/test_mqa build-carry/v4i/bench_attn
  git rev-parse --short HEAD > build-carry/v4i/COMMIT
  ls -la build-carry/v4i
  exit 0
fi
BIN=${BIN:-build-carry/v4i}
OUT=${OUT:-/tmp/out-v4i}
W=$(mktemp -d); mkdir -p "$OUT" "$W/tables"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-$(cat "$BIN/COMMIT" 2>/dev/null || echo unknown)}
NEW_FILTER=${NEW_FILTER:-'V4Attn.WarpSpecializedStaged16B:V4Attn.WarpSpecializedStaged16BLong:V4Attn.WarpSpecialized16BGather:V4Attn.PoolRowBytesFollowTheForm:V4Attn.StagedEpilogueDefaultIsUnsplitLaunchesOnly:V4Attn.NoSink'}
SAN_FILTER=${SAN_FILTER:-'V4Attn.WarpSpecializedStaged16B'}
CMP_ENV=${CMP_ENV:-'V4WS_ST=0 V4WS_ST=1'}
REPS=${REPS:-2}
DEC_PTS=${DEC_PTS:-128:512:65536,64:512:65536,128:512:1048576,128:64:65536,128:512:8192,128:512:16384,64:512:4096,128:512:1024}
PRE_PTS=${PRE_PTS-128:4096:65536,128:512:65536,64:4096:0}
OPS=${OPS:-csa_sparse_attn_decode,hca_attn_decode,swa_attn_decode,csa_sparse_attn_prefill,swa_attn_prefill}
PTS=$DEC_PTS${PRE_PTS:+,$PRE_PTS}
SWEEP_OPS=${SWEEP_OPS:-}
SWEEP_ENV=${SWEEP_ENV:-V4WS_ST=1}
T0=$(date +%s)
GUARD=${GUARD:-240}
el() { echo "after $(( $(date +%s) - T0 )) s"; }
left() { echo $(( GUARD - ($(date +%s) - T0) )); }
tl() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
room() { [ "$(left)" -ge "$1" ] || { echo "$2 skipped (time guard: $(left) s left, needs $1) $(el)"; return 1; }; }
summary() { grep -E '^\[ *(PASSED|FAILED|  OK|  SKIPPED) |ERROR SUMMARY' "$1" | tr '\n' ' '; }
{
  echo "commit $SERVESIM_COMMIT"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
  OK=1
  if [ "${TESTS:-1}" = 1 ]; then
    timeout $(tl ${TEST_T:-90}) "$BIN/test_mqa" --gtest_filter="$NEW_FILTER" > "$W/new.log" 2>&1; RC=$?; [ $RC = 0 ] || OK=0
    echo "test_mqa NEW exit $RC $(el): $(summary "$W/new.log")"
    grep -E "attn-test\] (v4_attn out|compressor)|Failure|FAILED" "$W/new.log" | sed 's/\[attn-test\] *//; s/wgmma_ws_m64_tn64//; s/bound=1.0e-02//' | head -70
    for tool in memcheck synccheck; do
      if room 25 "$tool"; then
        timeout $(tl 60) compute-sanitizer --tool $tool --print-limit 10 "$BIN/test_mqa" --gtest_filter="$SAN_FILTER" > "$W/$tool.log" 2>&1
        RC=$?; [ $RC = 0 ] || OK=0
        echo "$tool $SAN_FILTER exit $RC $(el): $(summary "$W/$tool.log")"
        grep -E -A5 "Invalid|out of bounds|Illegal|illegal|hazard|Barrier|barrier|divergent" "$W/$tool.log" | head -20
      fi
    done
  fi
  echo "tests ok: $OK $(el)"
  for rep in $(seq 1 "$REPS"); do
    for e in $CMP_ENV; do
      tag=$(echo "$e" | tr ',=' '_-')
      room 30 "bench $e rep $rep" || continue
      env $(echo "$e" | tr ',' ' ') timeout -k 5 $(tl ${BENCH_T:-60}) "$BIN/bench_attn" --out "$W/cmp_${tag}_r$rep" --only "$OPS" \
        --v4-attn-variant 3 --v4-attn-point "$PTS" --budget 60 --share-scale 3 > "$W/cmp_${tag}_r$rep.log" 2>&1
      echo "$e rep $rep exit $? $(el)"
    done
  done
  python3 - "$W" "$CMP_ENV" > "$OUT/cmp_table.txt" <<'PY'
import json, glob, sys
w, envs = sys.argv[1], sys.argv[2].split()
best = {}
for e in envs:
    tag = e.replace(",", "_").replace("=", "-")
    for f in glob.glob(f"{w}/cmp_{tag}_r*/*.json"):
        j = json.load(open(f))
        for r in j["rows"]:
            sh = r["shape"]
            k = (j["op"], sh.get("heads"), sh.get("batch", sh.get("chunk")), sh.get("ctx", sh.get("prefix")),
                 sh.get("rows_per_query", sh.get("rows_mean")))
            b = best.setdefault(k, {})
            if e not in b or r["us_median"] < b[e][0]:
                b[e] = (r["us_median"], r.get("tflops", 0))
print("op H B L rows | " + " | ".join(envs) + " | first/last  (us best of reps, TF/s)")
for k in sorted(best, key=lambda k: (k[0], -k[1], k[2], k[3])):
    v = best[k]
    rat = f"{v[envs[0]][0] / v[envs[-1]][0]:.3f}" if envs[0] in v and envs[-1] in v else "-"
    print(" ".join(str(x if not isinstance(x, float) else round(x)) for x in k) + " | " +
          " | ".join(f"{v[e][0]:.1f} ({v[e][1]:.0f})" if e in v else "-" for e in envs) + " | " + rat)
json.dump({"|".join(map(str, k)): v for k, v in best.items()}, open(f"{w}/cmp_best.json", "w"))
PY
  cat "$OUT/cmp_table.txt"
    # DBG_SPLIT=1: the bound split at DBG_PT (CSA prefill 4096 after 64K) in the 584-B F16 + QE + CD form (the debug
  # forms have no V16 build): V4WS_DEBUG 0 full, 1 no conversion, 2 no gather, 3 consumers only (wrong outputs)
  if [ "${DBG_SPLIT:-0}" = 1 ]; then
    for d in 0 1 2 3; do
      room 20 "debug split $d" || continue
      env V4WS_V16=0 V4WS_DEBUG=$d timeout -k 5 $(tl 40) "$BIN/bench_attn" --out "$W/dbg$d" --only csa_sparse_attn_prefill \
        --v4-attn-variant 3 --v4-attn-point "${DBG_PT:-128:4096:65536}" --budget 10 --share-scale 3 > "$W/dbg$d.log" 2>&1
      echo "V4WS_V16=0 V4WS_DEBUG=$d exit $? $(el): $(python3 -c "import json,glob,sys; [print(r['shape'], round(r['us_median'],1), 'us', round(r.get('tflops',0)), 'TF/s') for f in glob.glob(sys.argv[1]+'/*.json') for r in json.load(open(f))['rows']]" "$W/dbg$d" | tr '\n' ' ')"
    done
  fi
  # SWEEP_IF (a CMP_ENV setting, default the last): sweep only if it beats the first setting by >= 1% at the CSA
  # prefill point 128 x 4096 after 64K (best of REPS); empty: sweep regardless
  SWEEP_IF=${SWEEP_IF-${CMP_ENV##* }}
  if [ -n "$SWEEP_IF" ] && [ -n "$SWEEP_OPS" ]; then
    WIN=$(python3 - "$W" "${CMP_ENV%% *}" "$SWEEP_IF" <<'PY'
import json, sys
b = json.load(open(f"{sys.argv[1]}/cmp_best.json"))
v = b.get("csa_sparse_attn_prefill|128|4096|65536", {})
base, cand = sys.argv[2], sys.argv[3]
print(1 if base in v and cand in v and v[base][0] / v[cand][0] >= 1.01 else 0)
PY
)
    echo "sweep condition ($SWEEP_IF >= 1.01x of ${CMP_ENV%% *} at CSA prefill 4096 after 64K): $WIN"
    [ "$WIN" = 1 ] || SWEEP_OPS=
  fi
  if [ "$OK" = 1 ] && [ -n "$SWEEP_OPS" ]; then
    for op in $SWEEP_OPS; do
      IFS=: read -r name secs share <<< "$op"
      room $(( secs + 12 )) "sweep $name" || continue
      env $(echo "$SWEEP_ENV" | tr ',' ' ') V4_ATTN_MIN_HEADS=${MIN_HEADS:-64} timeout -k 5 $(tl $(( secs + 30 ))) "$BIN/bench_attn" --out "$W/tables" \
        --only "$name" --budget $(( secs + 5 )) --share-scale $(awk "BEGIN{print $secs / $share}") > "$W/sweep_$name.log" 2>&1
      echo "sweep $name ($SWEEP_ENV) exit $? $(el)"; grep -E "^== |best" "$W/sweep_$name.log"
    done
  fi
  if [ "${NCU:-0}" = 1 ] && command -v ncu > /dev/null && room 45 ncu; then
    env ${NCU_ENV:-V4WS_ST=1} timeout $(tl 120) ncu --clock-control none -k regex:v4_attn_ws_kernel -c 1 --set full -o "$W/ncu" \
      "$BIN/bench_attn" --out "$W/ncu_tables" --only "${NCU_OP:-csa_sparse_attn_prefill}" --budget 20 --v4-attn-variant 3 \
      --v4-attn-point "${NCU_PT:-128:512:65536}" > "$W/ncu_run.log" 2>&1
    echo "ncu exit $? $(el)"
    ncu -i "$W/ncu.ncu-rep" --print-details all > "$W/ncu.log" 2>&1
    grep -E "Duration|SM Frequency|Issue Slots|Eligible Warps|Pipe Tensor|Shared Memory|L1/TEX Hit|Mem Busy|Max Bandwidth|DRAM Throughput" "$W/ncu.log" | head -24
    ncu -i "$W/ncu.ncu-rep" --page raw --csv --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum > "$W/ncu_raw.csv" 2>&1
    cat "$W/ncu_raw.csv" | tail -2
      fi
  echo "total $(el)"
} 2>&1 | tee "$OUT/run.log"
# at most 4 files come back: run.log, cmp_table.txt, tables.tar.gz (sweeps), logs.tar.gz (the rest, ncu report incl.)
tar czf "$OUT/tables.tar.gz" -C "$W" tables $(cd "$W" && ls sweep_*.log 2>/dev/null)
tar czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls -d cmp_* dbg* *.log *.csv *.json *.ncu-rep 2>/dev/null)
