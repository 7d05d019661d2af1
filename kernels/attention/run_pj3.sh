#!/usr/bin/env bash
# Own FP8 dense GEMM, twentieth session, helper pj3 (token-split form: 64-row weight tiles x bt 128, two consumer
# warpgroups x 64 tokens; NOTES.md). One device call: tests, compute-sanitizer (memcheck + synccheck of the new
# test), reference points (DeepGEMM's 12 dense shapes at M 64 / 128 and M 72/96/112/128 at the four dense_proj
# tables' 24 N x K: cuBLASLt, own tuned over pj's forms (= the committed rows' method), the plan's current
# default + PDL ("rule"), the new form tuned over splits ("ts") and at forced configs) and, if SWEEP_ONLY is
# set, the table sweeps with PROJ_OWN_SET=rule (the plan's untuned choice + PDL) at SWEEP_M (M list).
#   here:   bash kernels/attention/run_pj3.sh carry        (copies the binaries from $BUILD to build-carry/pj3, gzipped)
#   device: GUARD=300 bash kernels/attention/run_pj3.sh
# Environment: BIN, OUT, GUARD, SANITIZE, POINTS (empty: none), POINTS_S, POINT_CFGS, SWEEP_ONLY, SWEEP_S, SWEEP_M, SWEEP_ARGS
set -uo pipefail
if [ "${1:-}" = carry ]; then
  BUILD=${BUILD:-build-v4f}
  rm -rf build-carry/pj3 && mkdir -p build-carry/pj3
  gzip -c "$BUILD/kernels/attention/test_proj" > build-carry/pj3/test_proj.gz
  gzip -c "$BUILD/kernels/attention/bench_attn" > build-carry/pj3/bench_attn.gz
  git rev-parse --short HEAD > build-carry/pj3/COMMIT
  ls -la build-carry/pj3
  exit 0
fi
BIN=${BIN:-build-carry/pj3}
OUT=${OUT:-out-pj3}
GUARD=${GUARD:-300}
mkdir -p "$OUT/tables"
T0=$(date +%s)
left() { echo $(( GUARD - ($(date +%s) - T0) )); }
for b in test_proj bench_attn; do [ -x "/tmp/pj3bin/$b" ] || { mkdir -p /tmp/pj3bin; gunzip -c "$BIN/$b.gz" > /tmp/pj3bin/$b; chmod +x /tmp/pj3bin/$b; }; done
B=/tmp/pj3bin
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-$(cat "$BIN/COMMIT" 2>/dev/null || echo unknown)}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/test.txt"
[ "${TESTS:-1}" = 1 ] && timeout $(( $(left) < 150 ? $(left) : 150 )) "$B/test_proj" 2>&1 | grep -E "attn-test|OK \]|FAILED|PASSED|SKIPPED|Failure|Expected|Which is|error|what" >> "$OUT/test.txt"
grep -E "PASSED|FAILED" "$OUT/test.txt"
echo "tests done after $(( $(date +%s) - T0 )) s"
if [ "${SANITIZE:-1}" = 1 ]; then
  for tool in memcheck synccheck; do
    ( timeout 150 compute-sanitizer --tool $tool --print-limit 10 "$B/test_proj" --gtest_filter="${SAN_FILTER:-Proj.OwnFp8TokenSplit}" > "$OUT/sanitizer_$tool.txt" 2>&1
      echo "exit $?" >> "$OUT/sanitizer_$tool.txt" ) &
  done
  wait
  for tool in memcheck synccheck; do echo "=== $tool"; grep -E "ERROR SUMMARY|^exit|PASSED|FAILED" "$OUT/sanitizer_$tool.txt"; done | tee "$OUT/sanitizer.txt"
  echo "sanitizers done after $(( $(date +%s) - T0 )) s"
fi
[ -z "${POINTS:-}" ] && [ -n "${POINTS_FILE:-}" ] && POINTS=$(cat "$POINTS_FILE")
if [ -n "${POINTS:-}" ]; then
  PROJ_OWN_SET=old PROJ_OWN_EXTRA=${POINT_EXTRA:-rule,ts} timeout $(( $(left) < 200 ? $(left) : 200 )) "$B/bench_attn" --out "$OUT/tables" \
    --budget ${POINTS_S:-170} --share-scale 1.5 --only dense_proj_fp8_points --proj-point "$POINTS" \
    ${POINT_CFGS:+--proj-own-cfg "$POINT_CFGS"} > "$OUT/points.log" 2>&1
  echo "points exit $?"; grep -E "^== |summary" "$OUT/points.log"
  echo "points done after $(( $(date +%s) - T0 )) s"
fi
if grep -q "FAILED" "$OUT/test.txt" || grep -q "ERROR SUMMARY: [1-9]" "$OUT"/sanitizer_*.txt 2>/dev/null; then
  echo "tests or sanitizer FAILED: no sweep"; SWEEP_ONLY=""
fi
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  echo "not an H200: no table sweep (the tables are H200 tables)"; SWEEP_ONLY=""
fi
if [ -n "${SWEEP_ONLY:-}" ]; then
  S=$(( $(left) - 20 ))
  [ "$S" -gt "${SWEEP_S:-200}" ] && S=${SWEEP_S:-200}
  echo "sweep budget $S s"
  PROJ_OWN_SET=rule PROJ_OWN_PIPE=${SWEEP_PIPE:-0} timeout -k 5 $(( S + 15 )) "$B/bench_attn" --out "$OUT/tables" --budget $S --only "$SWEEP_ONLY" \
    --proj-kinds fp8_block_scale ${SWEEP_M:+--proj-m-only "$SWEEP_M"} ${SWEEP_ARGS:-} > "$OUT/sweep.log" 2>&1
  echo "sweep exit $?"
  grep -E "^== |summary|skipped" "$OUT/sweep.log" | tail -20
fi
# NCU_RUNS=M:N:K:S,...: ncu of the plan's default (no PDL) and of the token-split form at split S (pipe 1, no PDL)
if [ -n "${NCU_RUNS:-}" ] && command -v ncu >/dev/null; then
  for pt in ${NCU_RUNS//,/ }; do
    IFS=: read -r M N K S <<< "$pt"
    for form in default ts; do
      [ "$(left)" -lt 30 ] && { echo "guard: ncu $pt $form skipped"; continue; }
      if [ $form = ts ]; then re="fp8_dense_kernelILi128ELi1ELi64ELi1E"; else re="${NCU_DEFAULT_RE:-fp8_dense_kernelILi64ELi1ELi64ELi0E}"; fi
      f="$OUT/ncu_${M}x${N}x${K}_$form.txt"
      timeout 90 ncu --clock-control none --kernel-name-base mangled -k "regex:$re" --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats \
        --metrics dram__bytes_read.sum,lts__t_bytes.sum \
        "$B/bench_attn" --out /tmp/ncu_tables_$form --budget 20 --only dense_proj_fp8_points --proj-own-no-tune --proj-point "$M:$N:$K" \
        --proj-own-cfg "128:$S:0:64:1:0" > "$f" 2>&1
      echo "== ncu $pt $form"; grep -E "Duration|DRAM Throughput|dram__bytes_read|lts__t_bytes|L2 Hit|Memory Throughput|Achieved Occupancy|Grid Size|Block Size|Registers Per|Waves" "$f" | head -14
    done
  done
fi
tar czf "$OUT/tables.tar.gz" -C "$OUT" tables && rm -rf "$OUT/tables"
echo "total $(( $(date +%s) - T0 )) s"
