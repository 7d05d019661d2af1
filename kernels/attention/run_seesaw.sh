#!/usr/bin/env bash
# Issue 12 device call for the seesaw MLA decode kernel (mla_decode variant 4, wgs namespace in mla_seesaw.cuh):
# MlaDecode tests (every variant, double CPU reference), compute-sanitizer memcheck of the seesaw
# tests, variant 0 vs 4 at reference points (run twice, interleaved: v0 v4 v0 v4), ncu of both at
# the compute-bound point (H=128, 512 x 4K), and -- only if SWEEP_S > 0, the tests passed and the
# seesaw kernel was faster at the H=128 points -- the mla_decode sweep with variant 4.
# Usage (repository root; binaries in $BUILD/kernels/attention):
#   BUILD=build-attn OUT=/tmp/out SERVESIM_COMMIT=<sha> [POINTS=B:H:L,...] [SWEEP_S=150] [SWEEP_MIN=1.03 (v0/v4 median
#   at H=128 above which the sweep runs)] [NCU=1] [NCU_EXTRA="--section SourceCounters --print-details all"] [SANITIZE=0]
#   [VARIANTS="0 4 5" NEW=5 (the variant compared with 0 in the table and swept)] [NCU_VARIANTS="0 5"]
#   bash kernels/attention/run_seesaw.sh
# -> $OUT/run.log, $OUT/cmp.tar.gz (bench tables + logs of the comparison), $OUT/ncu.txt, $OUT/tables.tar.gz (sweep)
set -uo pipefail
BUILD=${BUILD:-build-attn}
OUT=${OUT:-/tmp/out-seesaw}
BIN=$BUILD/kernels/attention
W=$(mktemp -d)
mkdir -p "$OUT" "$W/tables"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
POINTS=${POINTS:-128:128:4096,256:128:2048,16:128:65536,512:128:4096,64:128:8192,512:64:4096,128:96:4096,256:96:2048,64:16:32768,128:32:4096}
T0=$(date +%s)
{
  echo "commit $SERVESIM_COMMIT $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
  echo "=== test_mqa MlaDecode.*"
  timeout 240 "$BIN/test_mqa" --gtest_filter="${TEST_FILTER:-MlaDecode.*}" > "$W/test_mqa.log" 2>&1
  RC=$?
  grep -E "attn-test|OK \]|FAILED|PASSED|Failure|Expected|Which is|error" "$W/test_mqa.log" | cut -c1-200
  echo "test_mqa exit $RC after $(( $(date +%s) - T0 )) s"
  if [ "$RC" = 0 ] && [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer > /dev/null; then
    timeout 150 compute-sanitizer --tool memcheck --print-limit 20 "$BIN/test_mqa" --gtest_filter="${MEMCHECK_FILTER:-MlaDecode.WgmmaSeesaw}" > "$W/memcheck.log" 2>&1
    echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tr '\n' ' ')"
    grep -E "Invalid|out of bounds" "$W/memcheck.log" | head -5
    timeout 150 compute-sanitizer --tool synccheck "$BIN/test_mqa" --gtest_filter="${MEMCHECK_FILTER:-MlaDecode.WgmmaSeesaw}" > "$W/synccheck.log" 2>&1
    echo "synccheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/synccheck.log" | tr '\n' ' ')"
    echo "sanitizers done after $(( $(date +%s) - T0 )) s"
  fi
  if command -v cuobjdump > /dev/null; then
    cuobjdump -sass "$BIN/test_mqa" | awk '/Function : .*seesaw/{f=1;next} /Function :/{f=0} f' |
      grep -oE "\b(HGMMA\.[0-9x]+[^ ]*|UTMALDG[^ ]*|WARPGROUP[^ ;]*|LDL[^ ;]*|STL[^ ;]*)" | sort | uniq -c > "$W/sass_seesaw.txt"
    cat "$W/sass_seesaw.txt"
  fi
  if [ "$RC" = 0 ]; then
    for rep in 1 2; do
      for v in ${VARIANTS:-0 4}; do
        timeout 120 "$BIN/bench_attn" --out "$W/cmp_v${v}_r$rep" --only mla_decode --budget 60 --mla-decode-variant $v \
          --mla-decode-point "$POINTS" > "$W/compare_v${v}_r$rep.log" 2>&1
        echo "compare variant $v rep $rep exit $?"; grep -E "^  mla_decode" "$W/compare_v${v}_r$rep.log" | cut -c1-200
      done
    done
    python3 - "$W" <<'PY'
import json, sys, glob, os, statistics as st
W = sys.argv[1]
t = {}
for f in glob.glob(os.path.join(W, "cmp_v*_r*", "mla_decode.json")):
    v = int(os.path.basename(os.path.dirname(f)).split("_")[1][1:])
    NEWV = int(os.environ.get("NEW", "4"))
    if v not in (0, NEWV):
        continue
    if v == NEWV:
        v = 4  # the column "v4" below = the variant under test
    for r in json.load(open(f))["rows"]:
        s = r["shape"]
        k = (s["heads"], s["batch"], s["ctx_mean"])
        t.setdefault(k, {}).setdefault(v, []).append((r["us_median"], r["tflops"], r["tbps"]))
print("H  B  L  | v0 us (TF/s, TB/s) | v4 us (TF/s, TB/s) | v0/v4")
rat = {}
for k in sorted(t):
    if 0 in t[k] and 4 in t[k]:
        a = min(x[0] for x in t[k][0]); b = min(x[0] for x in t[k][4])
        a2 = [x for x in t[k][0] if x[0] == a][0]; b2 = [x for x in t[k][4] if x[0] == b][0]
        rat.setdefault(k[0], []).append(a / b)
        print(f"{k[0]} {k[1]} {k[2]} | {a:.1f} ({a2[1]:.0f}, {a2[2]:.2f}) | {b:.1f} ({b2[1]:.0f}, {b2[2]:.2f}) | {a / b:.3f}")
for h in sorted(rat):
    print(f"H={h}: speed-up v0/v4 median {st.median(rat[h]):.3f}")
ok = 128 in rat and st.median(rat[128]) > float(os.environ.get("SWEEP_MIN", "1.03"))
open(os.path.join(W, "seesaw_faster"), "w").write("1" if ok else "0")
PY
  fi
  if [ -n "${NCU:-}" ] && [ "$RC" = 0 ] && command -v ncu > /dev/null; then
    for v in ${NCU_VARIANTS:-0 4}; do
      timeout 100 ncu --clock-control none -k regex:'mla_decode_(wgmma|seesaw)_kernel' -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis --section SchedulerStats ${NCU_EXTRA:-} \
        "$BIN/bench_attn" --out "$W/ncu_v$v" --only mla_decode --budget 20 --mla-decode-variant $v --mla-decode-point 512:128:4096 > "$W/ncu_v$v.txt" 2>&1
      echo "ncu v$v exit $?"; grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|Registers|Achieved Occ|Issue Slots|No Eligible|Stall|Tensor|Pipe" "$W/ncu_v$v.txt" | head -24
    done
    cat "$W"/ncu_v*.txt > "$OUT/ncu.txt"
  fi
  if [ "$RC" = 0 ] && [ "${SWEEP_S:-0}" != 0 ] && [ "$(cat "$W/seesaw_faster" 2>/dev/null)" = 1 ]; then
    echo "=== mla_decode sweep with variant 4 (${SWEEP_S} s)"
    timeout -k 5 $(( SWEEP_S + 40 )) "$BIN/bench_attn" --out "$W/tables" --only mla_decode \
      --budget $(( SWEEP_S + 10 )) --share-scale $(awk "BEGIN{print ${SWEEP_S} / 70}") --mla-decode-variant ${NEW:-4} > "$W/bench_decode.log" 2>&1
    echo "bench exit $? after $(( $(date +%s) - T0 )) s"
    grep -E "^== |ratio" "$W/bench_decode.log" | head -30
  fi
  echo "total $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/cmp.tar.gz" -C "$W" $(cd "$W" && ls -d cmp_* *.log *.txt 2>/dev/null)
[ -s "$W/tables/mla_decode.json" ] && tar czf "$OUT/tables.tar.gz" -C "$W" tables
exit 0
