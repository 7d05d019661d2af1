#!/usr/bin/env bash
# Issue 12, seventh session: the warp-specialised V4 attention kernel (v4_attn variant 3) against the
# second session's wgmma kernel (variant 2). One device call: test_mqa V4Attn.* (CPU double
# reference, NaN-poisoned outputs), compute-sanitizer memcheck + synccheck of V4Attn.WarpSpecialized,
# SASS counts, then -- only if the tests passed -- bench_attn at fixed points with variants 2 and 3
# interleaved (twice), the PyTorch reference (torch_v4attn.py), and with SWEEP=1 the table sweeps of
# the default kernel (V4_ATTN_MIN_HEADS=64).
# Usage: BUILD=build-attn SERVESIM_COMMIT=<sha> [SWEEP=1 CSA_S=.. HCA_S=..] bash kernels/attention/run_v4ws.sh
set -uo pipefail
BUILD=${BUILD:-build-attn}
OUT=${OUT:-/tmp/out-attn}
BIN=$BUILD/kernels/attention
W=$(mktemp -d)
mkdir -p "$W/tables" "$OUT"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
DEC_PTS=${DEC_PTS:-128:512:65536,128:128:65536,128:32:65536,128:1:65536,128:512:4096,64:512:65536,64:128:65536,64:1:65536,64:512:4096,128:512:1048576,128:64:131072,64:512:1048576}
PRE_PTS=${PRE_PTS-128:4096:65536,128:16384:0,64:4096:65536,128:1024:1048576}
OPS=csa_sparse_attn_decode,hca_attn_decode${PRE_PTS:+,csa_sparse_attn_prefill}
PTS=$DEC_PTS${PRE_PTS:+,$PRE_PTS}
T0=$(date +%s)
{
  echo "commit $SERVESIM_COMMIT"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
  timeout 150 "$BIN/test_mqa" --gtest_filter="V4Attn.*" > "$W/test_mqa.log" 2>&1
  RC=$?
  grep -E "attn-test|OK \]|FAILED|PASSED|Failure|Expected|Which is|error" "$W/test_mqa.log" | head -40
  echo "test_mqa exit $RC after $(( $(date +%s) - T0 )) s"
  if [ "$RC" = 0 ]; then
    timeout 150 compute-sanitizer --tool memcheck --print-limit 10 "$BIN/test_mqa" --gtest_filter="V4Attn.WarpSpecialized" > "$W/memcheck.log" 2>&1
    echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tr '\n' ' ') after $(( $(date +%s) - T0 )) s"
    grep -E -A5 "Invalid|out of bounds|Illegal|illegal" "$W/memcheck.log" | head -20
    timeout 150 compute-sanitizer --tool synccheck --print-limit 10 "$BIN/test_mqa" --gtest_filter="V4Attn.WarpSpecialized" > "$W/synccheck.log" 2>&1
    echo "synccheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/synccheck.log" | tr '\n' ' ') after $(( $(date +%s) - T0 )) s"
  fi
  cuobjdump -sass "$BIN/test_mqa" | awk '/Function : .*v4_attn_ws_kernel/{f=1;next} /Function :/{f=0} f' > "$W/ws.sass"
  grep -oE "\b(HGMMA\.[0-9x]+[^ ]*|LDL[^ ]*|STL[^ ]*|LDGSTS[^ ]*|BAR\.[A-Z]+[^ ]*|SYNCS[^ ]*|USETMAXREG[^ ]*|PRMT|HMUL2[^ ]*)" "$W/ws.sass" | sort | uniq -c
  if [ "$RC" = 0 ]; then
    for rep in $(seq 1 ${REPS:-2}); do
      for v in 2 3; do
        timeout -k 5 200 "$BIN/bench_attn" --out "$W/cmp_v${v}_r${rep}" --only "$OPS" \
          --v4-attn-variant $v --v4-attn-point "$PTS" --budget 190 --share-scale 3 > "$W/cmp_v${v}_r${rep}.log" 2>&1
        echo "variant $v rep $rep exit $? after $(( $(date +%s) - T0 )) s"
        grep -E "^  (csa|hca)" "$W/cmp_v${v}_r${rep}.log"
      done
    done
    mkdir -p "$W/tables/cmp"; cp -r "$W"/cmp_v* "$W/tables/cmp/" 2>/dev/null
    for d in ${DBG_MODES:-}; do  # experiments: 1 = no conversion, 2 = no gather (wrong outputs, timing only)
      V4WS_DEBUG=$d timeout -k 5 100 "$BIN/bench_attn" --out "$W/dbg$d" --only csa_sparse_attn_decode --v4-attn-variant 3 \
        --v4-attn-point "${DBG_PTS:-128:512:65536,128:128:65536,64:512:65536}" --budget 90 --share-scale 3 > "$W/dbg$d.log" 2>&1
      echo "V4WS_DEBUG=$d exit $?"; grep -E "^  (csa|hca)" "$W/dbg$d.log"
    done
    if [ -n "${NCU:-}" ] && command -v ncu > /dev/null; then
      timeout 200 ncu --clock-control none -k regex:v4_attn_ws_kernel -c 1 --set full --import-source yes -o "$W/ncu_ws" \
        "$BIN/bench_attn" --out "$W/ncu_tables" --only csa_sparse_attn_decode --budget 30 --v4-attn-variant 3 \
        --v4-attn-point "${NCU_PT:-128:128:65536}" > "$W/ncu_run.log" 2>&1
      echo "ncu exit $? after $(( $(date +%s) - T0 )) s"
      ncu -i "$W/ncu_ws.ncu-rep" --print-details all > "$W/ncu_ws.log" 2>&1
      ncu -i "$W/ncu_ws.ncu-rep" --page source --csv --print-source sass > "$W/ncu_src.log" 2>&1
      echo "source page exit $?, $(wc -l < "$W/ncu_src.log") lines"
      grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|Registers|Issue Slots|No Eligible|Stall|Tensor|Pipe|Warp Cycles" "$W/ncu_ws.log" | head -40
    fi
    [ "${TORCH:-1}" = 1 ] && timeout 150 env PYTHONUNBUFFERED=1 python3 kernels/attention/torch_v4attn.py --out "$W/tables" > "$W/torch.log" 2>&1
    echo "torch exit $? after $(( $(date +%s) - T0 )) s"; cat "$W/torch.log" | grep -v Warning | tail -14
    if [ "${SWEEP:-0}" = 1 ]; then
      for op in csa_sparse_attn_decode:${CSA_S:-40}:26 hca_attn_decode:${HCA_S:-60}:20 csa_sparse_attn_prefill:${CSAP_S:-40}:30 hca_attn_prefill:${HCAP_S:-30}:22 swa_attn_decode:${SWA_S:-10}:5 swa_attn_prefill:${SWAP_S:-10}:7; do
        IFS=: read -r name secs share <<< "$op"
        V4_ATTN_MIN_HEADS=64 timeout -k 5 $(( secs + 40 )) "$BIN/bench_attn" --out "$W/tables" --only "$name" \
          --budget $(( secs + 5 )) --share-scale $(awk "BEGIN{print $secs / $share}") > "$W/sweep_$name.log" 2>&1
        echo "sweep $name exit $? after $(( $(date +%s) - T0 )) s"; grep -E "^== |best" "$W/sweep_$name.log"
      done
    fi
  else
    tail -40 "$W/test_mqa.log"
  fi
  echo "total $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/tables.tar.gz" -C "$W" tables
tar czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls *.log *.sass 2>/dev/null)
[ -f "$W/ncu_ws.ncu-rep" ] && cp "$W/ncu_ws.ncu-rep" "$OUT/" || true
