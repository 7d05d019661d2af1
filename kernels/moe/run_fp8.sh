#!/usr/bin/env bash
# One device call for issue 13 (FP8 block-scaled grouped GEMM): correctness tests (+ compute-sanitizer),
# the own-kernel sweep (bench_moe --only fp8own), the torch._scaled_grouped_mm reference, SASS check.
# EXTRA_ONLY=moe_grouped_gemm_fp8 adds the per-expert cuBLASLt sweep (tables/moe_grouped_gemm_fp8.json).
# Binaries come prebuilt in $BUILD (carried).  MODE=quick|full  BENCH_S (deadline of bench_moe)  TORCH_S
# BENCH_ARGS (extra bench_moe flags, e.g. --fp8-variant 5 --fp8-experts 2,4 --fp8-max-m 4096)  TORCH_ARGS
# (extra fp8_torch_ref.py flags, e.g. --experts 2,4 --max-m 4096 --no-deepgemm)  SANITIZE=0 skips compute-sanitizer
# Reproduce: MODE=full OUT=/tmp/out BUILD=build-moe bash kernels/moe/run_fp8.sh
set -u
MODE=${MODE:-full}; BUILD=${BUILD:-build-moe}; OUT=${OUT:-/tmp/fp8-out}
BENCH_S=${BENCH_S:-150}; TORCH_S=${TORCH_S:-60}
T0=$(date +%s)
mkdir -p "$OUT/tables"
LOG=$OUT/log.txt
{
  echo "== run_fp8.sh MODE=$MODE commit=${SERVESIM_COMMIT:-unknown} $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== tests"
  timeout 120 "$BUILD/moe/test_moe" --gtest_filter='MoeFp8*:MoeLib.CublasLtFp8*' > "$OUT/test_fp8.txt" 2>&1
  TRC=$?; echo "test_moe exit: $TRC"
  [ "$TRC" = 124 ] && { echo "test_moe TIMED OUT (hang?): skipping the rest"; tail -5 "$OUT/test_fp8.txt"; SANITIZE=0; BENCH_S=0; TORCH_S=0; }
  # the sweep uses kernel variant 0 unless one of its checks failed here
  # (-1 = bench_moe picks the fastest form at prefill; 0 if a tokens-as-M check failed; 1 if variant 0 failed)
  FP8V=-1; grep -E "v2tm|v3tm|v=4|v=5|v4 |v5 " "$OUT/test_fp8.txt" | grep -qE "Failure|rel L2 (nan|[1-9]\.[0-9]+e-0[01]|[0-9.]+e\+)|written: [1-9]" && FP8V=0
  grep -B2 -A6 "Failure" "$OUT/test_fp8.txt" | grep -q "v=4\|v=5\|v2tm\|v3tm" && FP8V=0
  grep -E "v0" "$OUT/test_fp8.txt" | grep -qE "Failure|rel L2 (nan|[1-9]\.[0-9]+e-0[01]|[0-9.]+e\+)|written: [1-9]" && FP8V=1
  grep -B2 -A6 "Failure" "$OUT/test_fp8.txt" | grep -q "v=0\|v0" && FP8V=1
  echo "fp8 kernel variant for the sweep: $FP8V"
  grep -E "^\[  (PASSED|FAILED|SKIPPED)|rel L2|Failure|Expected|Which|actual" "$OUT/test_fp8.txt" | cut -c1-200
  if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
    echo "== compute-sanitizer memcheck ($(($(date +%s)-T0)) s)"
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/moe/test_moe" \
      --gtest_filter='MoeFp8.MaskedLayoutMatchesReference:MoeFp8.ContiguousLayoutMatchesReference:MoeFp8.MaskedLayoutLargeM' > "$OUT/sanitizer.txt" 2>&1
    echo "memcheck exit: $?"; grep -E "ERROR SUMMARY|Invalid|PASSED|FAILED" "$OUT/sanitizer.txt" | head -8
    timeout 90 compute-sanitizer --tool synccheck --error-exitcode 9 "$BUILD/moe/test_moe" \
      --gtest_filter='MoeFp8.MaskedLayoutMatchesReference' > "$OUT/synccheck.txt" 2>&1
    echo "synccheck exit: $?"; grep -E "ERROR SUMMARY" "$OUT/synccheck.txt" | head -3
  fi
  Q=""; [ "$MODE" = quick ] && Q="--quick"
  # SM clock / power once a second during the bench (was the long 8 x 4096 point clock-limited?)
  command -v nvidia-smi >/dev/null && { nvidia-smi dmon -s pc -d 1 > "$OUT/dmon.txt" 2>&1 & DMON_PID=$!; }
  echo "== bench_moe fp8own ($(($(date +%s)-T0)) s)"
  [ "$BENCH_S" -gt 0 ] && timeout $((BENCH_S + 60)) "$BUILD/moe/bench_moe" --out "$OUT/tables" --only moe_ref_ceilings,fp8own${EXTRA_ONLY:+,$EXTRA_ONLY} --deadline-s "$BENCH_S" --fp8-variant $FP8V $Q ${BENCH_ARGS:-}
  echo "bench_moe exit: $?"
  [ -n "${DMON_PID:-}" ] && kill "$DMON_PID" 2>/dev/null
  if [ "$TORCH_S" -gt 0 ]; then
    echo "== torch._scaled_grouped_mm ($(($(date +%s)-T0)) s)"
    PYTHONUNBUFFERED=1 timeout $((TORCH_S + 60)) python3 kernels/moe/fp8_torch_ref.py --out "$OUT/tables/fp8own" --deadline-s "$TORCH_S" ${TORCH_ARGS:-}
    echo "torch exit: $?"
  fi
  if [ -n "${NCU_ARGS:-}" ] && command -v ncu >/dev/null; then
    echo "== ncu ($(($(date +%s)-T0)) s)"
    timeout 120 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
      --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SchedulerStats -k regex:'fp8_(grouped|tm)' -c ${NCU_COUNT:-4} "$BUILD/moe/bench_moe" $NCU_ARGS > "$OUT/ncu.txt" 2>&1
    echo "ncu exit: $?"
    grep -E "fp8_grouped|fp8_tm|Duration|Memory Throughput|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\)|Achieved Occupancy|Warp Cycles Per Issued|Stall|Registers Per|Mem Busy|Max Bandwidth|Shared|Bank|Pipe|Issue Slots|No Eligible|Eligible Warps|Active Warps" "$OUT/ncu.txt" | cut -c1-150 | head -90
  fi
  if command -v cuobjdump >/dev/null; then
    cuobjdump --dump-sass "$BUILD/moe/libmoe_kernels.a" 2>/dev/null | awk '/Function : /{f=($0 ~ /fp8_(grouped|tm)/)} f' > "$OUT/sass_fp8.txt"
    echo "SASS fp8_grouped: $(grep -c QGMMA "$OUT/sass_fp8.txt") QGMMA, $(grep -cE 'LDL|STL' "$OUT/sass_fp8.txt") LDL/STL, $(grep -c LDGSTS "$OUT/sass_fp8.txt") LDGSTS, $(grep -c 'WARPGROUP.DEPBAR' "$OUT/sass_fp8.txt") DEPBAR"
    gzip -f "$OUT/sass_fp8.txt"
  fi
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  echo "== done in $(($(date +%s)-T0)) s"
} 2>&1 | tee "$LOG"
tar -czf "$OUT/tables.tar.gz" -C "$OUT/tables" . && rm -rf "$OUT/tables"
echo "==== SUMMARY ===="
grep -E "PASSED|FAILED|rel L2|exit:|ERROR|ceiling|fp8 own|torch scaled|torch _scaled|SASS|done in" "$LOG" | cut -c1-230 | tail -90
