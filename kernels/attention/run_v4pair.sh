#!/usr/bin/env bash
# Issue 12, twelfth session: the 2-CTA cluster ("pair") form of the warp-specialised V4 attention
# kernel (v4_attn variant 3 at H % 128 == 0) against the one-CTA kernel, and the V4WS_REG=1 register
# split, in one device call: test_mqa V4Attn.* with the pair off (one-CTA kernel), then
# V4Attn.WarpSpecializedPair (pair on and off), compute-sanitizer memcheck + synccheck of it, SASS
# counts, bench_attn at fixed points under each setting of CMP_ENV (interleaved REPS times), the
# debug bound split (V4WS_DEBUG 1 = no conversion, 2 = no gather) of the pair kernel, NCU=1 ncu of it,
# SWEEP=1 the table sweeps of the default kernel.
# Usage: BUILD=build-attn SERVESIM_COMMIT=<sha> bash kernels/attention/run_v4pair.sh
set -uo pipefail
BIN=${BIN:-${BUILD:-build-attn}/kernels/attention}
OUT=${OUT:-/tmp/out-attn}
W=$(mktemp -d); mkdir -p "$W/tables" "$OUT"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
CMP_ENV=${CMP_ENV:-"V4WS_PAIR=0 V4WS_PAIR=0,V4WS_REG=1 V4WS_PAIR=1 V4WS_PAIR=1,V4WS_REG=1"}
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
    timeout 200 "$BIN/test_mqa" --gtest_filter="${TEST_FILTER:-V4Attn.*}" > "$W/test_v4attn.log" 2>&1
    RC=$?; [ $RC = 0 ] || OK=0
    echo "test_mqa V4Attn.* (defaults) exit $RC $(el): $(grep -E 'PASSED|FAILED' "$W/test_v4attn.log" | tr '\n' ' ')"
    grep -E "mode=[34]|FAILED|Failure" "$W/test_v4attn.log" | sed 's/\[attn-test\] *//; s/wgmma_ws_m64_tn64//; s/bound=1.0e-02//' | head -40
    if [ "$OK" = 1 ]; then
      timeout 200 compute-sanitizer --tool memcheck --print-limit 10 "$BIN/test_mqa" --gtest_filter="V4Attn.WarpSpecializedPair" > "$W/memcheck.log" 2>&1
      echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tr '\n' ' ') $(el)"
      grep -E -A5 "Invalid|out of bounds|Illegal|illegal" "$W/memcheck.log" | head -20
      timeout 200 compute-sanitizer --tool synccheck --print-limit 10 "$BIN/test_mqa" --gtest_filter="V4Attn.WarpSpecializedPair" > "$W/synccheck.log" 2>&1
      echo "synccheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/synccheck.log" | tr '\n' ' ') $(el)"
      grep -E -A3 "barrier|Barrier" "$W/synccheck.log" | head -12
    fi
  fi
  cuobjdump -sass "$BIN/bench_attn" | awk '/Function : .*v4_attn_ws_kernelILi0ELi1ELb1ELi0E/{f=1;next} /Function :/{f=0} f' > "$W/pair.sass"
  grep -oE "\b(HGMMA\.[0-9x]+[^ ]*|LDL[^ ]*|STL[^ ]*|LDGSTS[^ ]*|BAR\.[A-Z]+[^ ]*|SYNCS[^ ]*|USETMAXREG[^ ]*|PRMT|HMUL2[^ ]*|ST\.E[^ ]*|STS[^ ]*|UCGABAR[^ ]*|MEMBAR[^ ]*|ERRBAR|CCTL[^ ]*|FENCE[^ ]*)" "$W/pair.sass" | sort | uniq -c
  for rep in $(seq 1 ${REPS:-2}); do
    for e in $CMP_ENV; do
      case "$e" in *PAIR=1*) [ "$OK" = 1 ] || continue;; esac
      tag=$(echo "$e" | tr ',=' '_-')
      env $(echo "$e" | tr ',' ' ') timeout -k 5 ${BENCH_T:-90} "$BIN/bench_attn" --out "$W/cmp_${tag}_r$rep" --only "$OPS" \
        --v4-attn-variant 3 --v4-attn-point "$PTS" --budget 80 --share-scale 3 > "$W/cmp_${tag}_r$rep.log" 2>&1
      echo "$e rep $rep exit $? $(el)"
      grep -E "^  (csa|hca)" "$W/cmp_${tag}_r$rep.log" | awk '{printf "  %-24s %s %s\n", $1, substr($0, index($0,"{"), 56), $(NF-7)}'
    done
  done
  mkdir -p "$W/tables/cmp"; cp -r "$W"/cmp_* "$W/tables/cmp/" 2>/dev/null
  if [ "$OK" = 1 ]; then
    for d in ${DBG_MODES:-}; do
      V4WS_DEBUG=$d timeout -k 5 60 "$BIN/bench_attn" --out "$W/dbg$d" --only csa_sparse_attn_decode --v4-attn-variant 3 \
        --v4-attn-point "${DBG_PTS:-128:512:65536,128:128:65536}" --budget 50 --share-scale 3 > "$W/dbg$d.log" 2>&1
      echo "V4WS_DEBUG=$d (pair) exit $?"; grep -E "^  (csa|hca)" "$W/dbg$d.log" | awk '{printf "  %-24s %s %s\n", $1, substr($0, index($0,"{"), 56), $(NF-7)}'
    done
    if [ -n "${NCU:-}" ] && command -v ncu > /dev/null; then
      timeout 200 ncu --clock-control none -k regex:v4_attn_ws_kernel -c 1 --set full --import-source yes -o "$W/ncu_pair" \
        "$BIN/bench_attn" --out "$W/ncu_tables" --only csa_sparse_attn_decode --budget 30 --v4-attn-variant 3 \
        --v4-attn-point "${NCU_PT:-128:128:65536}" > "$W/ncu_run.log" 2>&1
      echo "ncu exit $? $(el)"
      ncu -i "$W/ncu_pair.ncu-rep" --print-details all > "$W/ncu_pair.log" 2>&1
      ncu -i "$W/ncu_pair.ncu-rep" --page source --csv --print-source sass > "$W/ncu_src.log" 2>&1
      grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|Registers|Issue Slots|No Eligible|Stall|Tensor|Pipe|Warp Cycles|Cluster" "$W/ncu_pair.log" | head -40
    fi
    SWEEP_ENV=${SWEEP_ENV:-}
    if [ "${SWEEP:-0}" = 1 ] && [ -z "$SWEEP_ENV" ]; then  # the faster tested default: pair on / off, by the sum of H=128 medians
      SWEEP_ENV=$(python3 - "$W" <<'PY'
import json, glob, os, sys, collections
tot = collections.defaultdict(float); n = collections.Counter()
for env in ("V4WS_PAIR=0", "V4WS_PAIR=1"):
    tag = env.replace("=", "-")
    best = {}
    for f in glob.glob(f"{sys.argv[1]}/cmp_{tag}_r*/*.json"):
        j = json.load(open(f))
        for r in j["rows"]:
            if r["shape"].get("heads") == 128:
                k = (j["op"], json.dumps(r["shape"], sort_keys=True))
                best[k] = min(best.get(k, 1e30), r["us_median"])
    tot[env] = sum(best.values()); n[env] = len(best)
ok = [e for e in tot if n[e] > 0 and n[e] == max(n.values())]
print(min(ok, key=lambda e: tot[e]) if ok else "V4WS_PAIR=0")
for e in tot: print(f"{e}: {n[e]} points, sum {tot[e]:.1f} us", file=sys.stderr)
PY
)
      echo "sweep env: $SWEEP_ENV"
    fi
    if [ "${SWEEP:-0}" = 1 ]; then
      for op in csa_sparse_attn_decode:${CSA_S:-40}:26 hca_attn_decode:${HCA_S:-60}:20 csa_sparse_attn_prefill:${CSAP_S:-40}:30 hca_attn_prefill:${HCAP_S:-30}:22 swa_attn_decode:${SWA_S:-10}:5 swa_attn_prefill:${SWAP_S:-10}:7; do
        IFS=: read -r name secs share <<< "$op"
        if [ $(( $(date +%s) - T0 + secs + 25 )) -gt ${SWEEP_DEADLINE:-570} ]; then echo "sweep $name skipped (time) $(el)"; continue; fi
        env $SWEEP_ENV V4_ATTN_MIN_HEADS=${MIN_HEADS:-64} timeout -k 5 $(( secs + 40 )) "$BIN/bench_attn" --out "$W/tables" --only "$name" \
          --budget $(( secs + 5 )) --share-scale $(awk "BEGIN{print $secs / $share}") > "$W/sweep_$name.log" 2>&1
        echo "sweep $name exit $? $(el)"; grep -E "^== |best" "$W/sweep_$name.log"
      done
    fi
  fi
  echo "total $(el)"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/tables.tar.gz" -C "$W" tables
tar czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls *.log *.sass 2>/dev/null)
[ -f "$W/ncu_pair.ncu-rep" ] && cp "$W/ncu_pair.ncu-rep" "$OUT/" || true
