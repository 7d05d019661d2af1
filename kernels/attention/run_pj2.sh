#!/usr/bin/env bash
# Own FP8 dense GEMM, eighteenth session, helper pj2 (consumer pipelines, Fp8DenseConfig::pipe; NOTES.md): one device call does
# tests, compute-sanitizer memcheck + synccheck (in parallel), the reference points (DeepGEMM's 12
# dense shapes at M 64 / 128 and 6 decode shapes: cuBLASLt, the own kernel tuned over the new forms
# and over the old forms in the same run: PROJ_OWN_SET=both) and, if the tests pass, the dense_proj
# FP8 table sweeps (PROJ_OWN_SET=new). A GUARD (seconds) bounds the whole call; each step gets the rest.
#   here:   bash kernels/attention/run_pj2.sh carry        (copies the binaries from $BUILD to build-carry/pj2)
#   device: GUARD=480 SERVESIM_COMMIT=<sha> bash kernels/attention/run_pj2.sh
# Environment: BIN (build-carry/pj2), OUT, GUARD, SANITIZE=1|0, POINTS, POINTS_S, SWEEP_ONLY (empty: no
# sweep), SWEEP_S, SWEEP_ARGS, GATE (1: sweep only if the new forms win at the points' median), NCU_POINTS (M:N:K,... profiled with ncu, heuristic form). Leaves under $OUT: test.txt sanitizer.txt points.log sweep.log tables.tar.gz
set -uo pipefail
if [ "${1:-}" = carry ]; then
  BUILD=${BUILD:-build-v4f}
  mkdir -p build-carry/pj2
  cp "$BUILD/kernels/attention/test_proj" "$BUILD/kernels/attention/bench_attn" build-carry/pj2/
  git rev-parse --short HEAD > build-carry/pj2/COMMIT
  ls -la build-carry/pj2
  exit 0
fi
BIN=${BIN:-build-carry/pj2}
OUT=${OUT:-out-pj2}
GUARD=${GUARD:-480}
mkdir -p "$OUT/tables"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-$(cat "$BIN/COMMIT" 2>/dev/null || echo unknown)}
T0=$(date +%s)
left() { echo $(( GUARD - ($(date +%s) - T0) )); }
DG="64:2112:7168,64:24576:1536,64:32768:512,64:7168:16384,64:4096:7168,64:7168:2048,128:2112:7168,128:24576:1536,128:32768:512,128:7168:16384,128:4096:7168,128:7168:2048"
DEC="1:7168:16384,1:2112:7168,1:4096:7168,1:64:7168,1:24576:1536,8:7168:2048"
POINTS=${POINTS:-$DG,$DEC}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/test.txt"
timeout $(( $(left) < 120 ? $(left) : 120 )) "$BIN/test_proj" 2>&1 | grep -E "attn-test|OK \]|FAILED|PASSED|SKIPPED|Failure|Expected|Which is|error" >> "$OUT/test.txt"
grep -E "PASSED|FAILED" "$OUT/test.txt"
echo "tests done after $(( $(date +%s) - T0 )) s"
if [ "${SANITIZE:-1}" = 1 ]; then
  for tool in memcheck synccheck; do
    ( timeout 200 compute-sanitizer --tool $tool --print-limit 10 "$BIN/test_proj" --gtest_filter='Proj.OwnFp8*' > "$OUT/sanitizer_$tool.txt" 2>&1
      echo "exit $?" >> "$OUT/sanitizer_$tool.txt" ) &
  done
  wait
  for tool in memcheck synccheck; do echo "=== $tool"; grep -E "ERROR SUMMARY|^exit|PASSED|FAILED" "$OUT/sanitizer_$tool.txt"; done | tee "$OUT/sanitizer.txt"
  echo "sanitizers done after $(( $(date +%s) - T0 )) s"
fi
if [ -n "$POINTS" ]; then
  PROJ_OWN_SET=both timeout $(( $(left) < 150 ? $(left) : 150 )) "$BIN/bench_attn" --out "$OUT/tables" --budget ${POINTS_S:-100} \
    --share-scale 1.5 --only dense_proj_fp8_points --proj-point "$POINTS" > "$OUT/points.log" 2>&1
  grep -E "dense_proj_fp8" "$OUT/points.log" | sed 's/  */ /g' | cut -c1-150
  echo "points done after $(( $(date +%s) - T0 )) s"
fi
# GATE=1: sweep only if the new forms beat the old (pipe 0) ones at the median of the points (same run)
if [ "${GATE:-1}" = 1 ] && [ -n "${SWEEP_ONLY:-}" ]; then
  python3 - "$OUT/tables/dense_proj_fp8_points.json" > "$OUT/gate.txt" 2>&1 <<'PY'
import json, sys, statistics
rows = json.load(open(sys.argv[1]))["rows"]
by = {}
for r in rows:
    g, _, v = r["variant"].partition("/")
    s = r["shape"]
    by.setdefault((g, s["M"], s["N"], s["K"]), {})[v] = r["us_median"]
rat = sorted(d["fp8_block_scale_own"] / d["fp8_block_scale_own_old"] for d in by.values()
             if "fp8_block_scale_own" in d and "fp8_block_scale_own_old" in d)
med = statistics.median(rat) if rat else 9
print("new/old per point", ["%.3f" % x for x in rat], "median %.3f" % med)
print("GATE", "pass" if med < 0.985 else "fail")
PY
  cat "$OUT/gate.txt"
  grep -q "GATE pass" "$OUT/gate.txt" || { echo "gate: new forms not faster: no sweep"; SWEEP_ONLY=""; }
fi
if grep -q "FAILED" "$OUT/test.txt" || grep -q "ERROR SUMMARY: [1-9]" "$OUT"/sanitizer_*.txt 2>/dev/null; then
  echo "tests or sanitizer FAILED: no sweep"; SWEEP_ONLY=""
fi
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  echo "not an H200: no table sweep (the tables are H200 tables)"; SWEEP_ONLY=""
fi
if [ -n "${SWEEP_ONLY:-}" ]; then
  S=$(( $(left) - 25 ))
  [ "$S" -gt "${SWEEP_S:-330}" ] && S=${SWEEP_S:-330}
  echo "sweep budget $S s"
  PROJ_OWN_SET=new timeout -k 5 $(( S + 15 )) "$BIN/bench_attn" --out "$OUT/tables" --budget $S --only "$SWEEP_ONLY" \
    --proj-kinds fp8_block_scale ${SWEEP_ARGS:-} > "$OUT/sweep.log" 2>&1
  echo "sweep exit $?"
  grep -E "^== |summary|skipped" "$OUT/sweep.log" | tail -20
fi
# ncu of the heuristic form (--proj-own-no-tune: the plan's default, no PDL) at NCU_POINTS (M:N:K,...)
if [ -n "${NCU_POINTS:-}" ] && command -v ncu >/dev/null; then
  for pt in ${NCU_POINTS//,/ }; do
    [ "$(left)" -lt 40 ] && { echo "guard: ncu of $pt skipped"; continue; }
    f="$OUT/ncu_${pt//:/x}.txt"
    timeout 60 ncu --clock-control none -k regex:fp8_dense --launch-skip 5 --launch-count 1 --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats \
      "$BIN/bench_attn" --out /tmp/ncu_tables --budget 20 --only dense_proj_fp8_points --proj-own-no-tune --proj-point "$pt" > "$f" 2>&1
    echo "== ncu $pt"; grep -E "fp8_dense_kernel|Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|Achieved Occupancy|Grid Size|Block Size|Registers Per|Stall" "$f" | head -16
  done
fi
tar czf "$OUT/tables.tar.gz" -C "$OUT" tables && rm -rf "$OUT/tables"
echo "total $(( $(date +%s) - T0 )) s"
