#!/usr/bin/env bash
# NOTE: the ring producer (V4WS_RING) was removed from dsv4.cu in the commit that added this line (see NOTES.md top); V4WS_RING is now ignored, so ring/in-place comparisons here measure the same kernel twice. Kept for results/v4b.
# Issue 12, thirteenth session (helper v4b): the ring producer of the warp-specialised V4 attention
# kernel (v4_attn variant 3, env V4WS_RING=1, 16-B whole-row gathers into a per-warp ring of raw
# row slots, 4-row groups converted while the next group is in flight) against the twelfth session's
# in-place producer (V4WS_RING=0), in one device call: test_mqa V4Attn.* under the defaults (ring on),
# the WarpSpecialized test with the ring off, compute-sanitizer memcheck + synccheck of
# V4Attn.WarpSpecialized, SASS counts of the ring kernel, bench_attn at fixed points under each
# CMP_ENV setting (interleaved REPS times), the debug bound split (V4WS_DEBUG 1 = no conversion,
# 2 = no gather) of the ring kernel, NCU=1 ncu of it, SWEEP=1 the six V4 table sweeps under SWEEP_ENV.
# Usage: BIN=build-carry/v4 SERVESIM_COMMIT=<sha> bash kernels/attention/run_v4b.sh
set -uo pipefail
BIN=${BIN:-build-attn/kernels/attention}
OUT=${OUT:-/tmp/out-attn}
W=$(mktemp -d); mkdir -p "$W/tables" "$OUT"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
CMP_ENV=${CMP_ENV:-"V4WS_RING=0 V4WS_RING=1"}
DEC_PTS=${DEC_PTS:-128:512:65536,128:128:65536,128:32:65536,128:1:65536,128:512:4096,64:512:65536,64:128:65536,128:512:1048576,128:64:131072,64:512:1048576}
PRE_PTS=${PRE_PTS-128:4096:65536,128:16384:0,64:4096:65536}
OPS=csa_sparse_attn_decode,hca_attn_decode${PRE_PTS:+,csa_sparse_attn_prefill}
PTS=$DEC_PTS${PRE_PTS:+,$PRE_PTS}
T0=$(date +%s)
el() { echo "after $(( $(date +%s) - T0 )) s"; }
{
  echo "commit $SERVESIM_COMMIT"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
  OK=1
  if [ "${TESTS:-1}" = 1 ]; then
    timeout 200 "$BIN/test_mqa" --gtest_filter="${TEST_FILTER:-V4Attn.WarpSpecialized*:V4Attn.ProHeads*:V4Attn.FlashHeads*:V4Attn.NoSink}" > "$W/test_v4attn.log" 2>&1
    RC=$?; [ $RC = 0 ] || OK=0
    echo "test_mqa V4Attn (defaults: ring on) exit $RC $(el): $(grep -E 'PASSED|FAILED' "$W/test_v4attn.log" | tr '\n' ' ')"
    grep -E "mode=|FAILED|Failure" "$W/test_v4attn.log" | sed 's/\[attn-test\] *//; s/wgmma_ws_m64_tn64//; s/bound=1.0e-02//' | head -40
    if [ "${RING0_TEST:-1}" = 1 ]; then
      V4WS_RING=0 timeout 200 "$BIN/test_mqa" --gtest_filter="V4Attn.WarpSpecialized" > "$W/test_ring0.log" 2>&1
      echo "test_mqa V4Attn.WarpSpecialized (V4WS_RING=0) exit $? $(el): $(grep -E 'PASSED|FAILED' "$W/test_ring0.log" | tr '\n' ' ')"
    fi
    if [ "$OK" = 1 ]; then
      timeout 200 compute-sanitizer --tool memcheck --print-limit 10 "$BIN/test_mqa" --gtest_filter="V4Attn.WarpSpecialized" > "$W/memcheck.log" 2>&1
      echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tr '\n' ' ') $(el)"
      grep -E -A5 "Invalid|out of bounds|Illegal|illegal" "$W/memcheck.log" | head -20
      timeout 200 compute-sanitizer --tool synccheck --print-limit 10 "$BIN/test_mqa" --gtest_filter="V4Attn.WarpSpecialized" > "$W/synccheck.log" 2>&1
      echo "synccheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/synccheck.log" | tr '\n' ' ') $(el)"
      grep -E -A3 "barrier|Barrier|hazard" "$W/synccheck.log" | head -12
    fi
  fi
  cuobjdump -sass "$BIN/bench_attn" | awk '/Function : .*v4_attn_ws_kernelILi0ELi1ELb0ELi0ELb1E/{f=1;next} /Function :/{f=0} f' > "$W/ring.sass"
  cuobjdump -sass "$BIN/bench_attn" | awk '/Function : .*v4_attn_ws_kernelILi0ELi1ELb0ELi0ELb0E/{f=1;next} /Function :/{f=0} f' > "$W/inplace.sass"
  for f in ring inplace; do echo "SASS $f: $(wc -l < "$W/$f.sass") lines"
    grep -oE "\b(HGMMA\.[0-9x]+[^ ]*|LDL[^ ]*|STL[^ ]*|LDGSTS[^ ]*|BAR\.[A-Z]+[^ ]*|SYNCS[^ ]*|USETMAXREG[^ ]*|PRMT|HMUL2[^ ]*|LDS[^ ]*|STS[^ ]*|MEMBAR[^ ]*|FENCE[^ ]*)" "$W/$f.sass" | sort | uniq -c | tr '\n' ';'; echo; done
  for rep in $(seq 1 ${REPS:-2}); do
    for e in $CMP_ENV; do
      tag=$(echo "$e" | tr ',=' '_-')
      env $(echo "$e" | tr ',' ' ') timeout -k 5 ${BENCH_T:-90} "$BIN/bench_attn" --out "$W/cmp_${tag}_r$rep" --only "$OPS" \
        --v4-attn-variant 3 --v4-attn-point "$PTS" --budget 80 --share-scale 3 > "$W/cmp_${tag}_r$rep.log" 2>&1
      echo "$e rep $rep exit $? $(el)"
      grep -E "^  (csa|hca)" "$W/cmp_${tag}_r$rep.log" | awk '{printf "  %-24s %s %s\n", $1, substr($0, index($0,"{"), 56), $(NF-7)}'
    done
  done
  mkdir -p "$W/tables/cmp"; cp -r "$W"/cmp_* "$W/tables/cmp/" 2>/dev/null
  if [ "$OK" = 1 ]; then
    for d in ${DBG_MODES:-1 2}; do
      for e in ${DBG_ENV:-V4WS_RING=1}; do
        env $e V4WS_DEBUG=$d timeout -k 5 60 "$BIN/bench_attn" --out "$W/dbg$d" --only csa_sparse_attn_decode --v4-attn-variant 3 \
          --v4-attn-point "${DBG_PTS:-128:512:65536,128:128:65536}" --budget 50 --share-scale 3 > "$W/dbg$d.log" 2>&1
        echo "$e V4WS_DEBUG=$d exit $?"; grep -E "^  (csa|hca)" "$W/dbg$d.log" | awk '{printf "  %-24s %s %s\n", $1, substr($0, index($0,"{"), 56), $(NF-7)}'
      done
    done
    if [ -n "${NCU:-}" ] && command -v ncu > /dev/null; then
      timeout 200 ncu --clock-control none -k regex:v4_attn_ws_kernel -c 1 --set full --import-source yes -o "$W/ncu_ring" \
        "$BIN/bench_attn" --out "$W/ncu_tables" --only csa_sparse_attn_decode --budget 30 --v4-attn-variant 3 \
        --v4-attn-point "${NCU_PT:-128:128:65536}" > "$W/ncu_run.log" 2>&1
      echo "ncu exit $? $(el)"
      ncu -i "$W/ncu_ring.ncu-rep" --print-details all > "$W/ncu_ring.log" 2>&1
      ncu -i "$W/ncu_ring.ncu-rep" --page source --csv --print-source sass > "$W/ncu_src.log" 2>&1
      grep -E "Duration|SM Frequency|Issue Slots|No Eligible|Eligible Warps|Pipe Tensor Cycles|Warp Cycles Per Issued" "$W/ncu_ring.log" | head -20
      grep -E "^    stall_[a-z_]+ +warp" "$W/ncu_ring.log" | sort -k3 -n -r -t' ' | head -12
    fi
    if [ "${SWEEP:-0}" = 1 ] && [ -z "${SWEEP_ENV:-}" ]; then  # sweep only if the ring is faster in this run (sum of best-of-REPS medians)
      SWEEP_ENV=$(python3 - "$W" <<'PY'
import json, glob, sys, collections
tot = collections.defaultdict(float); n = collections.Counter()
for env in ("V4WS_RING=0", "V4WS_RING=1"):
    best = {}
    for f in glob.glob(f"{sys.argv[1]}/cmp_{env.replace('=', '-')}_r*/*.json"):
        j = json.load(open(f))
        for r in j["rows"]:
            k = (j["op"], json.dumps(r["shape"], sort_keys=True))
            best[k] = min(best.get(k, 1e30), r["us_median"])
    tot[env] = sum(best.values()); n[env] = len(best)
for e in tot: print(f"{e}: {n[e]} points, sum {tot[e]:.1f} us", file=sys.stderr)
print("V4WS_RING=1" if n["V4WS_RING=1"] == n["V4WS_RING=0"] > 0 and tot["V4WS_RING=1"] < tot["V4WS_RING=0"] else "none")
PY
)
      echo "sweep env: $SWEEP_ENV"
      [ "$SWEEP_ENV" = none ] && SWEEP=0
    fi
    if [ "${SWEEP:-0}" = 1 ]; then
      for op in csa_sparse_attn_decode:${CSA_S:-30}:26 hca_attn_decode:${HCA_S:-60}:20 csa_sparse_attn_prefill:${CSAP_S:-40}:30 hca_attn_prefill:${HCAP_S:-30}:22 swa_attn_decode:${SWA_S:-8}:5 swa_attn_prefill:${SWAP_S:-8}:7; do
        IFS=: read -r name secs share <<< "$op"
        if [ $(( $(date +%s) - T0 + secs + 25 )) -gt ${SWEEP_DEADLINE:-570} ]; then echo "sweep $name skipped (time) $(el)"; continue; fi
        env ${SWEEP_ENV:-V4WS_RING=1} V4_ATTN_MIN_HEADS=${MIN_HEADS:-64} timeout -k 5 $(( secs + 40 )) "$BIN/bench_attn" --out "$W/tables" --only "$name" \
          --budget $(( secs + 5 )) --share-scale $(awk "BEGIN{print $secs / $share}") > "$W/sweep_$name.log" 2>&1
        echo "sweep $name exit $? $(el)"; grep -E "^== |best" "$W/sweep_$name.log"
      done
    fi
  fi
  echo "total $(el)"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/tables.tar.gz" -C "$W" tables
tar czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls *.log *.sass 2>/dev/null)
[ -f "$W/ncu_ring.ncu-rep" ] && cp "$W/ncu_ring.ncu-rep" "$OUT/" || true
