#!/usr/bin/env bash
# Own FP8 dense GEMM (proj_fp8.cu, issue 13): tests + sanitizer, reference points (DeepGEMM's dense
# shapes: cuBLASLt and own in the same run, torch._scaled_mm beside), and optionally the dense_proj
# FP8 table sweeps. Binaries already built in $BUILD (test_proj, bench_attn). Leaves under $OUT:
#   test.txt  sanitizer.txt  points.log  tables.tar.gz  [sweep.log]
# Environment: SANITIZE=1|0, POINTS="M:N:K,...", SWEEP_ONLY="dense_proj_v4pro,dense_proj_v4flash"
# (empty: no sweep), SWEEP_S (bench budget), SWEEP_ARGS, TORCH=1|0, NCU_POINT="M:N:K" (optional).
set -uo pipefail
BUILD=${BUILD:-build-attn}
BIN=$BUILD/kernels/attention
OUT=${OUT:-out-proj}
mkdir -p "$OUT/tables"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/test.txt"
timeout 200 "$BIN/test_proj" 2>&1 | grep -E "attn-test|OK \]|FAILED|PASSED|SKIPPED|Failure|Expected|Which is|error" >> "$OUT/test.txt"
grep -E "PASSED|FAILED" "$OUT/test.txt"
if [ "${SANITIZE:-1}" = 1 ]; then
  for tool in memcheck synccheck; do
    echo "=== $tool" >> "$OUT/sanitizer.txt"
    timeout 200 compute-sanitizer --tool $tool --print-limit 10 "$BIN/test_proj" --gtest_filter='Proj.OwnFp8*' >> "$OUT/sanitizer.txt" 2>&1
    echo "exit $?" >> "$OUT/sanitizer.txt"
  done
  grep -E "^===|ERROR SUMMARY|^exit" "$OUT/sanitizer.txt"
fi
echo "tests took $(( $(date +%s) - T0 )) s"
if [ -n "${POINTS:-}" ]; then
  timeout 200 "$BIN/bench_attn" --out "$OUT/tables" --budget ${POINTS_S:-90} --only dense_proj_fp8_points --proj-point "$POINTS" ${POINTS_ARGS:-} > "$OUT/points.log" 2>&1
  grep -E "dense_proj_fp8" "$OUT/points.log" | sed 's/  */ /g' | cut -c1-170
  if [ "${TORCH:-1}" = 1 ]; then
    timeout 150 python3 kernels/attention/dense_fp8_torch_ref.py --out "$OUT/tables" --points "$POINTS" --deadline-s ${TORCH_S:-60} 2>&1 | tail -60
  fi
fi
echo "points done after $(( $(date +%s) - T0 )) s"
if grep -q "FAILED" "$OUT/test.txt"; then echo "tests FAILED: no sweep"; SWEEP_ONLY=""; fi
if [ -n "${SWEEP_ONLY:-}" ]; then
  timeout -k 5 $(( ${SWEEP_S:-300} + 30 )) "$BIN/bench_attn" --out "$OUT/tables" --budget ${SWEEP_S:-300} --only "$SWEEP_ONLY" \
    --proj-kinds fp8_block_scale ${SWEEP_ARGS:-} > "$OUT/sweep.log" 2>&1
  echo "sweep exit $?"
  grep -E "^== |summary" "$OUT/sweep.log"
fi
if [ -n "${NCU_POINT:-}" ] && command -v ncu >/dev/null; then
  timeout 120 ncu --clock-control none -k regex:fp8_dense --launch-skip 5 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    "$BIN/bench_attn" --out /tmp/ncu_tables --budget 20 --only dense_proj_fp8_points --proj-own-no-tune --proj-point "$NCU_POINT" > "$OUT/ncu.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Achieved Occupancy" "$OUT/ncu.txt" | head -12
fi
tar czf "$OUT/tables.tar.gz" -C "$OUT" tables && rm -rf "$OUT/tables"
echo "total $(( $(date +%s) - T0 )) s"
