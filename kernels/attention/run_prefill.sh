#!/usr/bin/env bash
# Issue 12 device call for the wgmma/TMA MLA prefill (mla_prefill variants 2-4, mla_prefill_wg.cu):
# test_mla_prefill (double CPU reference, every variant), compute-sanitizer memcheck + synccheck of the
# wgmma tests, variants 1-4 at reference points (bench_attn --mla-prefill-point), PyTorch SDPA (cuDNN
# and the flash backend) at the same points in the same call, ncu of the fastest new variant at one
# point, and -- only if the tests passed and the fastest new variant is >= SWEEP_MIN x variant 1 at
# the 96-head points -- the mla_prefill sweep (heads 96,48,24,12) with that variant for SWEEP_S s.
# Usage (repository root; binaries in $BIN):
#   BIN=build-attn/kernels/attention OUT=/tmp/out SERVESIM_COMMIT=<sha> [POINTS=N:P:H,...] [SWEEP_S=300]
#   [SWEEP_MIN=1.3] [NCU=1] [VARIANTS=1,2,3,4 (compared; 1 is the baseline)] [TESTS=0 (skip tests/sanitizers)]
#   [BACKENDS=cudnn,flash] bash kernels/attention/run_prefill.sh
# -> $OUT/run.log, $OUT/cmp.tar.gz (compare tables + logs), $OUT/tables.tar.gz (sweep), $OUT/ncu.txt
set -uo pipefail
BIN=${BIN:-build-attn/kernels/attention}
OUT=${OUT:-/tmp/out-prefill}
W=$(mktemp -d)
mkdir -p "$OUT" "$W/tables" "$W/cmp" "$W/torch"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
export PYTHONUNBUFFERED=1
POINTS=${POINTS:-512:4096:96,1024:8192:96,2048:65536:96,4096:0:96,8192:0:96,8192:16384:96,16384:0:96,16384:32768:96,4096:0:12,4096:16384:24}
T0=$(date +%s)
{
  echo "commit $SERVESIM_COMMIT $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
  echo "=== test_mla_prefill"
  RC=0
  [ "${TESTS:-1}" != 0 ] && { timeout 180 "$BIN/test_mla_prefill" > "$W/test.log" 2>&1; RC=$?; }
  grep -E "attn-test|OK \]|FAILED|PASSED|Failure|Expected|Which is|error" "$W/test.log" | cut -c1-200
  echo "test exit $RC after $(( $(date +%s) - T0 )) s"
  if [ "$RC" = 0 ] && [ "${TESTS:-1}" != 0 ] && command -v compute-sanitizer > /dev/null; then
    for tool in memcheck synccheck; do
      timeout 120 compute-sanitizer --tool $tool --print-limit 20 "$BIN/test_mla_prefill" --gtest_filter='MlaPrefill.Wgmma*' > "$W/$tool.log" 2>&1
      echo "$tool exit $?: $(grep -E 'ERROR SUMMARY' "$W/$tool.log" | tr '\n' ' ')"
      grep -E "Invalid|out of bounds|Barrier|hazard" "$W/$tool.log" | head -5
    done
    echo "sanitizers done after $(( $(date +%s) - T0 )) s"
  fi
  if command -v cuobjdump > /dev/null; then
    cuobjdump -sass "$BIN/test_mla_prefill" | awk '/Function : .*mla_prefill_wgmma/{f=1;print;next} /Function :/{f=0} f' |
      grep -oE "(Function : .*|\bHGMMA\.[0-9x]+[^ ]*|UTMALDG[^ ]*|WARPGROUP[^ ;]*|LDL[^ ;]*|STL[^ ;]*)" | sort | uniq -c > "$W/sass.txt"
    cut -c1-160 "$W/sass.txt"
  fi
  echo "=== compare variants ${VARIANTS:-1,2,3,4} at $POINTS"
  timeout 150 "$BIN/bench_attn" --out "$W/cmp" --only mla_prefill --budget 120 --share-scale 2.4 \
    --mla-prefill-variant ${VARIANTS:-1,2,3,4} --mla-prefill-point "$POINTS" > "$W/compare.log" 2>&1
  echo "compare exit $? after $(( $(date +%s) - T0 )) s"
  python3 - "$W/cmp/mla_prefill.json" > "$W/best.txt" <<'EOF'
import json, sys, collections
rows = json.load(open(sys.argv[1]))["rows"]
by = collections.defaultdict(dict)
for r in rows:
    s = r["shape"]
    by[(s["chunk"], s["prefix"], s["heads"])][r["variant"]] = r
names = {1: "bm128", 2: "wgmma_tma_bm128_bn128", 3: "wgmma_tma_bm128_bn128_overlap", 4: "wgmma_tma_bm128_bn128_pingpong"}
ratios = collections.defaultdict(list)
for k, d in sorted(by.items()):
    line = f"N={k[0]} P={k[1]} H={k[2]}:"
    for v, n in names.items():
        if n in d:
            line += f"  v{v} {d[n]['us_median']:.1f} us {d[n]['tflops']:.0f} TF/s"
            if v > 1 and names[1] in d and k[2] == 96:
                ratios[v].append(d[names[1]]["us_median"] / d[n]["us_median"])
    print(line, file=sys.stderr)
best, bv = 0, 0
for v, rs in ratios.items():
    rs.sort()
    med = rs[len(rs) // 2]
    print(f"variant {v}: speed-up over v1 at 96 heads median {med:.2f} (min {rs[0]:.2f})", file=sys.stderr)
    if med > best:
        best, bv = med, v
print(bv, best)
EOF
  cat "$W/best.txt"
  read BV BEST < "$W/best.txt"
  echo "=== torch SDPA (cuDNN, flash) at the same points after $(( $(date +%s) - T0 )) s"
  timeout 150 python3 kernels/attention/torch_ref.py --out "$W/torch" --ops mla_prefill --budget 100 --points "$POINTS" \
    --prefill-backends ${BACKENDS:-cudnn,flash} > "$W/torch.log" 2>&1
  echo "torch exit $? after $(( $(date +%s) - T0 )) s"
  grep -E "check|bottom-right|torch |unavailable|Error" "$W/torch.log" | cut -c1-200
  if [ -n "${NCU:-}" ] && [ "${BV:-0}" -ge 2 ] && command -v ncu > /dev/null; then
    timeout 90 ncu --clock-control none -k regex:mla_prefill_wgmma -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
      --section WarpStateStats --section Occupancy "$BIN/bench_attn" --out "$W/ncu_tables" --only mla_prefill --budget 20 \
      --mla-prefill-variant "$BV" --mla-prefill-point 8192:0:96 > "$W/ncu.log" 2>&1
    echo "ncu exit $?"; grep -E "Duration|Throughput|Pipe|Registers|Achieved|Stall|Issue|Eligible" "$W/ncu.log" | head -40
    cp "$W/ncu.log" "$OUT/ncu.txt"
  fi
  if [ "$RC" = 0 ] && [ "${SWEEP_S:-0}" != 0 ] && [ "${BV:-0}" -ge 2 ] && awk "BEGIN{exit !($BEST >= ${SWEEP_MIN:-1.3})}"; then
    LEFT=$(( ${CALL_S:-570} - ($(date +%s) - T0) - 20 ))
    S=$(( LEFT < ${SWEEP_S} ? LEFT : ${SWEEP_S} ))
    echo "=== mla_prefill sweep, variant $BV, ${S} s (heads 96,48,24,12)"
    timeout -k 5 $(( S + 15 )) "$BIN/bench_attn" --out "$W/tables" --only mla_prefill --budget $(( S + 5 )) \
      --share-scale $(awk "BEGIN{print $S / 48}") --mla-prefill-variant "$BV" --mla-heads 96,48,24,12 > "$W/sweep.log" 2>&1
    echo "sweep exit $? after $(( $(date +%s) - T0 )) s"
    grep -E "^== |ratio|best at|skipped" "$W/sweep.log" | head -20
  else
    echo "no sweep (tests rc $RC, best variant ${BV:-?} at ${BEST:-?} x v1)"
  fi
  echo "total $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/cmp.tar.gz" -C "$W" cmp torch $(cd "$W" && ls *.log *.txt 2>/dev/null)
tar czf "$OUT/tables.tar.gz" -C "$W" tables
