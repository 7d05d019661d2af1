#!/usr/bin/env bash
# Issue 12, nineteenth session (helper v4p): the V4 sparse-attention prefill cliff at prefix 0 -- the split rule of
# the V4 attention plan (mqa.cu mla_decode_plan_tiles: rule 0 = the wave cost, rule 1 = no split where the unsplit
# items' list schedule is no longer) against a forced unsplit plan (bench env V4_PLAN_UNSPLIT=1). The rule's env:
# SERVESIM_MLA_PLAN_RULE in call 1 (binaries 2621455: mla_decode_plan's rule, default 0); since the next commit
# SERVESIM_V4_PLAN_RULE (v4_attn_plan's rule, default 1; mla_decode_plan is rule 0 always).
# `bash kernels/attention/run_v4p.sh carry` (here, after building test_mqa and bench_attn in build-v4f) copies the
# binaries (stripped) to the ignored build-carry/v4p; without an argument (device call, carry build-carry/v4p) it
# runs, under a global time guard GUARD (default 420 s; each phase starts only with room left):
#   1. TESTS=1: test_mqa TEST_FILTER (default V4Attn.*) in SHARDS parallel gtest shards, under TEST_ENV
#      (default none: the binaries' defaults);
#   2. compute-sanitizer memcheck of SAN_FILTER (default V4Attn.PlanRuleRampBothRules: a ramp, split and unsplit);
#   3. CMP=1: bench_attn at PTS (csa / hca prefill, H 64 / 128, chunks 1024-8192, prefix 0 / 4096) under each
#      CMP_ENV setting, interleaved REPS times; best of REPS per point in cmp_table.txt;
#   4. SWEEP_OPS (op:seconds:share): table sweeps (heads >= 64) under the default of the binaries;
#   5. NCU=1: ncu --set full of the attention kernel (1 launch) at NCU_PT under the default plan and unsplit, and
#      the SpeedOfLight section of the combine kernel (1 launch) under the default plan.
# Out: $OUT/run.log, cmp_table.txt, tables.tar.gz (sweeps), logs.tar.gz (test / sanitizer / bench logs, ncu).
set -uo pipefail
if [ "${1:-}" = carry ]; then
  mkdir -p build-carry/v4p
  cp build-v4f/kernels/attention/test_mqa build-v4f/kernels/attention/bench_attn build-carry/v4p/
  strip --strip-unneeded build-carry/v4p/test_mqa build-carry/v4p/bench_attn
  git rev-parse --short HEAD > build-carry/v4p/COMMIT
  ls -la build-carry/v4p
  exit 0
fi
BIN=${BIN:-build-carry/v4p}
OUT=${OUT:-/tmp/out-v4p}
W=$(mktemp -d); mkdir -p "$OUT" "$W/tables"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-$(cat "$BIN/COMMIT" 2>/dev/null || echo unknown)}
TEST_FILTER=${TEST_FILTER:-'V4Attn.*'}
TEST_ENV=${TEST_ENV:-}
SHARDS=${SHARDS:-4}
SAN_FILTER=${SAN_FILTER:-'V4Attn.PlanRuleRampBothRules'}
CMP_ENV=${CMP_ENV:-'SERVESIM_V4_PLAN_RULE=0 V4_PLAN_UNSPLIT=1 SERVESIM_V4_PLAN_RULE=1'}
REPS=${REPS:-2}
if [ -z "${PTS:-}" ]; then
  PTS=""
  for h in 64 128; do for n in 1024 1536 2048 3072 4096 6144 8192; do for p in 0 4096; do PTS="$PTS${PTS:+,}$h:$n:$p"; done; done; done
fi
OPS=${OPS:-csa_sparse_attn_prefill,hca_attn_prefill}
SWEEP_OPS=${SWEEP_OPS:-}
NCU_PT=${NCU_PT:-64:2048:0}
T0=$(date +%s)
GUARD=${GUARD:-420}
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
    TT=$(tl ${TEST_T:-150})
    for s in $(seq 0 $(( SHARDS - 1 ))); do
      env $TEST_ENV GTEST_TOTAL_SHARDS=$SHARDS GTEST_SHARD_INDEX=$s timeout "$TT" "$BIN/test_mqa" --gtest_filter="$TEST_FILTER" > "$W/test_s$s.log" 2>&1 &
    done
    for s in $(seq 0 $(( SHARDS - 1 ))); do wait -n || OK=0; done
    for s in $(seq 0 $(( SHARDS - 1 ))); do echo "test_mqa ($TEST_ENV) shard $s $(el): $(summary "$W/test_s$s.log")"; done
    grep -hE "Failure|FAILED|plan rule" "$W"/test_s*.log | sed 's/\[attn-test\] *//' | head -40
    if room 30 memcheck; then
      env $TEST_ENV timeout $(tl 120) compute-sanitizer --tool memcheck --print-limit 10 "$BIN/test_mqa" --gtest_filter="$SAN_FILTER" > "$W/memcheck.log" 2>&1
      RC=$?; [ $RC = 0 ] || OK=0
      echo "memcheck $SAN_FILTER ($TEST_ENV) exit $RC $(el): $(summary "$W/memcheck.log")"
      grep -E -A5 "Invalid|out of bounds|Illegal|illegal" "$W/memcheck.log" | head -20
    fi
  fi
  echo "tests ok: $OK $(el)"
  if [ "${CMP:-1}" = 1 ]; then
    for rep in $(seq 1 "$REPS"); do
      for e in $CMP_ENV; do
        tag=$(echo "$e" | tr ',=' '_-')
        room 40 "bench $e rep $rep" || continue
        env $(echo "$e" | tr ',' ' ') V4_PLAN_INFO=1 timeout -k 5 $(tl ${BENCH_T:-90}) "$BIN/bench_attn" --out "$W/cmp_${tag}_r$rep" --only "$OPS" \
          --v4-attn-variant 3 --v4-attn-point "$PTS" --budget 80 --share-scale 3 > "$W/cmp_${tag}_r$rep.log" 2>&1
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
            k = (j["op"], sh.get("heads"), sh.get("chunk"), sh.get("prefix"), sh.get("rows_mean"))
            b = best.setdefault(k, {})
            if e not in b or r["us_median"] < b[e][0]:
                b[e] = (r["us_median"], r.get("tflops", 0))
print("op H chunk prefix rows_mean | " + " | ".join(envs) + " | first/second first/last  (us best of reps, TF/s)")
for k in sorted(best, key=lambda k: (k[0], k[1], k[3], k[2])):
    v = best[k]
    rat = lambda a, b: f"{v[a][0] / v[b][0]:.3f}" if a in v and b in v else "-"
    print(" ".join(str(x if not isinstance(x, float) else round(x)) for x in k) + " | " +
          " | ".join(f"{v[e][0]:.1f} ({v[e][1]:.0f})" if e in v else "-" for e in envs) + " | " +
          rat(envs[0], envs[1 % len(envs)]) + " " + rat(envs[0], envs[-1]))
json.dump({"|".join(map(str, k)): v for k, v in best.items()}, open(f"{w}/cmp_best.json", "w"))
PY
    cat "$OUT/cmp_table.txt"
    grep -h "v4-plan" "$W"/cmp_*_r1.log | sort | uniq | head -80
  fi
  if [ "$OK" = 1 ] && [ -n "$SWEEP_OPS" ]; then
    for op in $SWEEP_OPS; do
      IFS=: read -r name secs share <<< "$op"
      room $(( secs + 12 )) "sweep $name" || continue
      V4_ATTN_MIN_HEADS=${MIN_HEADS:-64} timeout -k 5 $(tl $(( secs + 30 ))) "$BIN/bench_attn" --out "$W/tables" \
        --only "$name" --budget $(( secs + 5 )) --share-scale $(awk "BEGIN{print $secs / $share}") > "$W/sweep_$name.log" 2>&1
      echo "sweep $name (default of the binaries) exit $? $(el)"; grep -E "^== |best" "$W/sweep_$name.log"
    done
  fi
  if [ "${NCU:-0}" = 1 ] && command -v ncu > /dev/null; then
    for e in SERVESIM_V4_PLAN_RULE=0 V4_PLAN_UNSPLIT=1; do
      room 45 "ncu $e" || continue
      t=$(echo "$e" | tr '=' '-')
      env $e timeout $(tl 100) ncu --clock-control none -k regex:v4_attn_ws_kernel -c 1 --set full -o "$W/ncu_$t" \
        "$BIN/bench_attn" --out "$W/ncu_tables_$t" --only csa_sparse_attn_prefill --budget 5 --v4-attn-variant 3 \
        --v4-attn-point "$NCU_PT" > "$W/ncu_run_$t.log" 2>&1
      echo "ncu $e exit $? $(el)"
      ncu -i "$W/ncu_$t.ncu-rep" --print-details all > "$OUT/ncu_$t.txt" 2>&1
      grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|Issue Slots|Eligible Warps|No Eligible|Achieved Occupancy|DRAM Throughput|Registers Per|Grid Size" "$OUT/ncu_$t.txt" | head -24
      ncu -i "$W/ncu_$t.ncu-rep" --page raw --csv --metrics gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__average_warp_latency_issue_stalled_barrier,smsp__average_warp_latency_issue_stalled_long_scoreboard,smsp__average_warp_latency_issue_stalled_wait,sm__cycles_active.avg > "$OUT/ncu_raw_$t.csv" 2>&1
      tail -2 "$OUT/ncu_raw_$t.csv"
    done
    if room 30 "ncu combine"; then
      SERVESIM_V4_PLAN_RULE=0 timeout $(tl 60) ncu --clock-control none -k regex:mla_combine -c 1 --section SpeedOfLight \
        "$BIN/bench_attn" --out "$W/ncu_tables_c" --only csa_sparse_attn_prefill --budget 5 --v4-attn-variant 3 \
        --v4-attn-point "$NCU_PT" > "$OUT/ncu_combine.txt" 2>&1
      echo "ncu combine exit $? $(el)"; grep -E "Duration|Memory Throughput|DRAM Throughput|Grid Size" "$OUT/ncu_combine.txt" | head
    fi
  fi
  echo "total $(el)"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/tables.tar.gz" -C "$W" tables $(cd "$W" && ls sweep_*.log 2>/dev/null)
tar czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls -d cmp_* *.log *.json *.ncu-rep 2>/dev/null)
