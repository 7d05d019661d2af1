#!/usr/bin/env bash
# Issue 12 device call (one nvidia-h200 call): the MLA decode tests (wgmma kernel and the earlier
# one), compute-sanitizer memcheck of the new kernel's tests, SASS counts, then -- only if test_mqa
# passed -- the mla_decode sweep (new kernel on the committed grid + head counts 128/64/32/16 + the
# old kernel at a few points), and the PyTorch library references (cuDNN SDPA at the mla_prefill
# grid, torch.bmm for the absorption GEMMs; kernels/attention/torch_ref.py).
# Usage (repository root; binaries in $BUILD/kernels/attention):
#   BUILD=build-attn OUT=/tmp/out SERVESIM_COMMIT=<sha> DECODE_S=150 TORCH_S=120 [NCU=1] [QUICK=1 (decode)] [TORCH_ARGS=--quick] \
#     [BENCH_EXTRA="--mla-decode-variant 3"] [COMPARE_POINTS=B:H:L,... COMPARE_VARIANTS="0 3"] [MEMCHECK_FILTER=...] \
#     bash kernels/attention/run_issue12.sh
# -> $OUT/run.log, $OUT/tables.tar.gz (mla_decode.json, mla_prefill_torch.json,
#    dense_proj_k3_mla_torch.json), $OUT/logs.tar.gz
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
  echo "=== test_mqa"
  timeout 240 "$BIN/test_mqa" > "$W/test_mqa.log" 2>&1
  RC=$?
  grep -E "attn-test|OK \]|FAILED|PASSED|Failure|Expected|Which is|error" "$W/test_mqa.log"
  echo "test_mqa exit $RC after $(( $(date +%s) - T0 )) s"
  if [ "$RC" = 0 ] && command -v compute-sanitizer > /dev/null; then
    timeout 150 compute-sanitizer --tool memcheck --print-limit 20 "$BIN/test_mqa" \
      --gtest_filter="${MEMCHECK_FILTER:-MlaDecode.WgmmaHeadCountsAndTails:MlaDecode.MixedContextsSplitKV}" > "$W/memcheck.log" 2>&1
    echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tr '\n' ' ')"
    grep -E "Invalid|out of bounds" "$W/memcheck.log" | head -5
    echo "memcheck done after $(( $(date +%s) - T0 )) s"
  fi
  if command -v cuobjdump > /dev/null; then
    cuobjdump -sass "$BIN/test_mqa" | python3 kernels/attention/sass_summary.py > "$W/sass_summary.txt" 2>&1
    grep -E "kernel|mla_decode_wgmma|mqa_fwd" "$W/sass_summary.txt" | cut -c1-200
    cuobjdump -sass "$BIN/test_mqa" | awk '/Function : .*mla_decode_wgmma/{f=1;next} /Function :/{f=0} f' |
      grep -oE "\b(HGMMA\.[0-9x]+[^ ]*|UTMALDG[^ ]*|SYNCS[^ ;]*|WARPGROUP[^ ;]*)" | sort | uniq -c > "$W/sass_wgmma.txt"
    cat "$W/sass_wgmma.txt"
  fi
  if [ "$RC" = 0 ] && [ -n "${COMPARE_POINTS:-}" ]; then
    for v in ${COMPARE_VARIANTS:-0 3}; do
      timeout 120 "$BIN/bench_attn" --out "$W/cmp_v$v" --only mla_decode --budget 60 --mla-decode-variant $v \
        --mla-decode-point "$COMPARE_POINTS" > "$W/compare_v$v.log" 2>&1
      echo "compare variant $v exit $?"; grep -E "^  mla_decode" "$W/compare_v$v.log" | cut -c1-200
    done
  fi
  if [ "$RC" = 0 ] && [ "${DECODE_S:-150}" != 0 ]; then
    echo "=== mla_decode sweep (${DECODE_S:-150} s, ${BENCH_EXTRA:-})"
    timeout -k 5 $(( ${DECODE_S:-150} + 40 )) "$BIN/bench_attn" --out "$W/tables" --only mla_decode \
      --budget $(( ${DECODE_S:-150} + 10 )) --share-scale $(awk "BEGIN{print ${DECODE_S:-150} / 70}") $Q ${BENCH_EXTRA:-} \
      > "$W/bench_decode.log" 2>&1
    echo "bench exit $? after $(( $(date +%s) - T0 )) s"
    grep -E "^== |ratio|mla_decode " "$W/bench_decode.log" | grep -v "^  mla_decode  " | head -60
    if [ -n "${NCU:-}" ] && command -v ncu > /dev/null; then
      timeout 90 ncu --clock-control none -k regex:mla_decode_wgmma -c 2 --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section Occupancy "$BIN/bench_attn" --out "$W/ncu_tables" --only mla_decode --quick --budget 20 \
        --mla-decode-heads 128 --mla-decode-no-legacy > "$W/ncu.log" 2>&1
      echo "ncu exit $?"; grep -E "Duration|Throughput|Pipe|Registers|Achieved" "$W/ncu.log" | head -30
    fi
  else
    echo "test_mqa failed: no mla_decode sweep"
    tail -60 "$W/test_mqa.log"
  fi
  if [ "${TORCH_S:-120}" != 0 ]; then
  echo "=== torch references (${TORCH_S:-120} s) after $(( $(date +%s) - T0 )) s"
  timeout -k 5 $(( ${TORCH_S:-120} + 60 )) python3 kernels/attention/torch_ref.py --out "$W/tables" --budget "${TORCH_S:-120}" ${TORCH_ARGS:-} \
    > "$W/torch.log" 2>&1
  echo "torch exit $? after $(( $(date +%s) - T0 )) s"
  grep -vE "^\s*$" "$W/torch.log" | tail -20
  fi
  echo "=== summary"
  sed -n '/==== summary/,$p' "$W/bench_decode.log" 2>/dev/null
  echo "total $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/tables.tar.gz" -C "$W" tables
tar czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls *.log *.txt 2>/dev/null)
