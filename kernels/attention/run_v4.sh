#!/usr/bin/env bash
# Issue 12 device call for the V4 indexer logits and top-k (one nvidia-h200 call): test_dsv4 (all
# V4 tests incl. the wgmma indexer and the cluster top-k), compute-sanitizer memcheck of the new
# kernels' tests, SASS counts, then -- only if test_dsv4 passed -- bench_attn sweeps of csa_indexer
# and csa_topk (the committed grids) and the PyTorch library references (torch_ref.py v4_indexer,
# v4_topk), optionally a few legacy-kernel points and ncu.
# Usage (repository root; binaries in $BUILD/kernels/attention):
#   BUILD=build-attn OUT=/tmp/out SERVESIM_COMMIT=<sha> IDX_S=120 TOPK_S=100 TORCH_S=60 [QUICK=1] [NCU=1] [MEMCHECK=0] \
#     bash kernels/attention/run_v4.sh
# -> $OUT/run.log, $OUT/tables.tar.gz (csa_indexer.json, csa_topk.json, *_torch.json), $OUT/logs.tar.gz
set -uo pipefail
BUILD=${BUILD:-build-attn}
OUT=${OUT:-/tmp/out-attn}
BIN=$BUILD/kernels/attention
W=$(mktemp -d)
mkdir -p "$W/tables" "$OUT"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
export PYTHONUNBUFFERED=1
T0=$(date +%s)
Q=""
[ -n "${QUICK:-}" ] && Q="--quick"
{
  echo "commit $SERVESIM_COMMIT"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
  echo "=== test_dsv4"
  RC=0
  for f in ${TEST_SUITES:-"V4Indexer.*" "V4TopK.*" "V4Compressor.*"}; do  # separate processes: a device fault stays in its suite
    timeout 150 "$BIN/test_dsv4" --gtest_filter="$f" >> "$W/test_dsv4.log" 2>&1 || RC=1
  done
  grep -E "attn-test|OK \]|FAILED|PASSED|Failure|Expected|Which is|error|row " "$W/test_dsv4.log" | head -60
  echo "test_dsv4 exit $RC after $(( $(date +%s) - T0 )) s"
  if [ "${MEMCHECK:-1}" != 0 ] && command -v compute-sanitizer > /dev/null; then
    timeout 150 compute-sanitizer --tool memcheck --print-limit 20 "$BIN/test_dsv4" \
      --gtest_filter="${MEMCHECK_FILTER:-V4Indexer.*:V4TopK.ClusterSmemAllSizes}" > "$W/memcheck.log" 2>&1
    echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tr '\n' ' ')"
    grep -E -A6 "Invalid|out of bounds|FAILED|Illegal|illegal" "$W/memcheck.log" | head -30
    echo "memcheck done after $(( $(date +%s) - T0 )) s"
  fi
  if command -v cuobjdump > /dev/null; then
    cuobjdump -sass "$BIN/test_dsv4" | awk '/Function : .*indexer_wgmma/{f=1;next} /Function :/{f=0} f' |
      grep -oE "\b(QGMMA\.[0-9x]+[^ ]*|HGMMA\.[0-9x]+[^ ]*|UTMALDG[^ ]*|UBLKCP[^ ]*|LDL[^ ]*|STL[^ ]*)" | sort | uniq -c > "$W/sass_indexer.txt"
    echo "SASS indexer_wgmma:"; cat "$W/sass_indexer.txt"
  fi
  if [ "$RC" = 0 ]; then
    if [ "${IDX_S:-120}" != 0 ]; then
    echo "=== csa_indexer sweep (${IDX_S:-120} s)"
    timeout -k 5 $(( ${IDX_S:-120} + 40 )) "$BIN/bench_attn" --out "$W/tables" --only csa_indexer \
      --budget $(( ${IDX_S:-120} + 10 )) --share-scale $(awk "BEGIN{print ${IDX_S:-120} / 26}") $Q > "$W/bench_indexer.log" 2>&1
    echo "bench exit $? after $(( $(date +%s) - T0 )) s"; grep -E "ratio|done|skipped|failed" "$W/bench_indexer.log" | head -10
    fi
    echo "=== csa_topk sweep (${TOPK_S:-100} s)"
    timeout -k 5 $(( ${TOPK_S:-100} + 40 )) "$BIN/bench_attn" --out "$W/tables" --only csa_topk \
      --budget $(( ${TOPK_S:-100} + 10 )) --share-scale $(awk "BEGIN{print ${TOPK_S:-100} / 14}") $Q > "$W/bench_topk.log" 2>&1
    echo "bench exit $? after $(( $(date +%s) - T0 )) s"; grep -E "ratio|done|skipped|failed" "$W/bench_topk.log" | head -10
    if [ -n "${LEGACY_S:-}" ]; then
      mkdir -p "$W/legacy"
      timeout -k 5 $(( LEGACY_S + 30 )) "$BIN/bench_attn" --out "$W/legacy" --only csa_indexer,csa_topk --quick --v4-legacy \
        --budget $(( LEGACY_S + 5 )) --share-scale $(awk "BEGIN{print ${LEGACY_S} / 40}") > "$W/bench_legacy.log" 2>&1
      echo "legacy bench exit $?"
    fi
    if [ -n "${NCU:-}" ] && command -v ncu > /dev/null; then
      timeout 120 ncu --clock-control none -k regex:"indexer_wgmma|topk_cluster" -c 4 --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section Occupancy --section LaunchStats "$BIN/bench_attn" --out "$W/ncu_tables" --only csa_indexer,csa_topk --quick --budget 30 > "$W/ncu.log" 2>&1
      echo "ncu exit $?"; grep -E "indexer_wgmma|topk_cluster|Duration|Throughput|Registers|Achieved Occ|Block Limit" "$W/ncu.log" | head -60
    fi
    if [ -n "${NCU_TOPK:-}" ] && command -v ncu > /dev/null; then  # "B:L:K ..." one ncu run per point, new kernel then legacy
      for pt in $NCU_TOPK; do
        for leg in "" "--v4-legacy"; do
          TOPK_POINTS=$pt timeout 60 ncu --clock-control none -k regex:topk -c 1 --section SpeedOfLight --section WarpStateStats \
            --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats "$BIN/bench_attn" --out "$W/ncu_t" --only csa_topk \
            --budget 15 $leg > "$W/ncu_topk_${pt//:/_}${leg:+_legacy}.log" 2>&1
          echo "ncu topk $pt $leg exit $?"
          grep -E "topk|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Shared Memory Config|Stall|Warp Cycles Per Issued" \
            "$W/ncu_topk_${pt//:/_}${leg:+_legacy}.log" | head -16
        done
      done
    fi
  else
    echo "test_dsv4 failed: no sweep"
    tail -80 "$W/test_dsv4.log"
  fi
  if [ "${TORCH_S:-60}" != 0 ]; then
    echo "=== torch references (${TORCH_S:-60} s) after $(( $(date +%s) - T0 )) s"
    timeout -k 5 $(( ${TORCH_S:-60} + 60 )) python3 kernels/attention/torch_ref.py --out "$W/tables" --budget "${TORCH_S:-60}" \
      --ops v4_indexer,v4_topk ${TORCH_ARGS:-} > "$W/torch.log" 2>&1
    echo "torch exit $? after $(( $(date +%s) - T0 )) s"
    grep -vE "^\s*$" "$W/torch.log" | tail -8
  fi
  echo "total $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/tables.tar.gz" -C "$W" tables $( [ -d "$W/legacy" ] && echo legacy )
tar czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls *.log *.txt 2>/dev/null)
