#!/usr/bin/env bash
# Issue 12, twenty-fourth session (helper mla128d): MLA decode variant $NEW (default 14, mla_seesaw_p0.cuh)
# vs the table's variant 12 on the device, one call (run_mla128c.sh with the variant numbers as parameters).
#   here:   bash kernels/attention/run_mla128d.sh carry      (strips + xz's test_mqa / bench_attn of $BUILD into
#           build-carry/mla128d)
#   device: OUT=$OUT SERVESIM_COMMIT=<sha> NEW=14 TEST_FILTER=... SAN_TEST=... bash kernels/attention/run_mla128d.sh
# Steps (each behind the time guard GUARD, seconds from the start):
#  1. test_mqa $TEST_FILTER, double CPU reference;
#  2. compute-sanitizer memcheck of $SAN_TEST;
#  3. same run v12 / v$NEW at $POINTS, 2 repetitions, order 12 new new 12; table + gate (gate.txt);
#  4. only if the gate passes at H=128: the table's rows (non-mixed wgmma rows of
#     costmodels/data/h200/mla_decode.json) with variant $NEW for the heads where the gate passes (128 / 64 only);
#     merged into the table here, not on the device.
#  5. ncu (--clock-control none) of v$NEW then v12 at H=128 512 x 4K (warp stall reasons), time permitting.
set -uo pipefail
if [ "${1:-}" = carry ]; then
  BUILD=${BUILD:-build-v4f}
  C=build-carry/mla128d
  rm -rf "$C" && mkdir -p "$C"
  for b in test_mqa bench_attn; do
    strip -o "$C/$b" "$BUILD/kernels/attention/$b" && xz -T2 -6 "$C/$b"
  done
  ls -la "$C"
  exit 0
fi
BIN=${BIN:-/tmp/mla128d_bin}
mkdir -p "$BIN"
for b in test_mqa bench_attn; do
  [ -x "$BIN/$b" ] || { xz -dc "build-carry/mla128d/$b.xz" > "$BIN/$b" && chmod +x "$BIN/$b"; }
done
OUT=${OUT:-/tmp/out-mla128d}
W=$OUT/work
mkdir -p "$W"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
NEW=${NEW:-14}
export NEW
GUARD=${GUARD:-540}
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( GUARD - $(el) )); }
POINTS=${POINTS:-512:128:4096,128:128:32768,256:128:2048,16:128:65536,64:128:8192,12:128:262144,128:128:4096,128:96:4096,256:96:2048,64:96:32768,512:64:4096,128:64:8192,16:64:65536,128:32:4096}
TABLE=costmodels/data/h200/mla_decode.json
{
  echo "commit $SERVESIM_COMMIT $(date -u +%FT%TZ) guard $GUARD"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
  echo "=== 1. test_mqa"
  timeout ${TEST_S:-120} "$BIN/test_mqa" --gtest_filter="${TEST_FILTER:-MlaDecode.WgmmaSeesawP0Buf*}" > "$W/test_mqa.log" 2>&1
  RC=$?
  grep -E "attn-test|OK \]|FAILED|PASSED|Failure|Expected|Which is|error" "$W/test_mqa.log" | cut -c1-200
  echo "test_mqa exit $RC after $(el) s"
  if command -v cuobjdump > /dev/null; then
    for k in seesaw_rs_kernelILi2 ${SASS_K:-seesaw_p0_kernel}; do
      echo "SASS $k:"; cuobjdump -sass "$BIN/test_mqa" | awk -v k="$k" '$0 ~ "Function : .*"k {f=1;next} /Function :/{f=0} f' |
        grep -oE "\b(HGMMA\.[0-9x]+[^ ]*|UTMALDG[^ ]*|WARPGROUP[^ ;]*|LDL[^ ;]*|STL[^ ;]*|BAR\.[A-Z]+[^ ;]*)" | sort | uniq -c
    done
  fi
  if [ "$RC" = 0 ] && command -v compute-sanitizer > /dev/null && [ "$(left)" -gt ${SAN_MIN:-380} ]; then
    echo "=== 2. sanitizers"
    timeout ${MEM_S:-170} compute-sanitizer --tool memcheck --print-limit 20 "$BIN/test_mqa" --gtest_filter=${SAN_TEST:-MlaDecode.WgmmaSeesawP0BufSmall} > "$W/memcheck.log" 2>&1
    echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tr '\n' ' ') after $(el) s"
    grep -E "Invalid|out of bounds|FAILED" "$W/memcheck.log" | head -5
    if [ "$(left)" -gt ${SYNC_MIN:-380} ]; then
      timeout 90 compute-sanitizer --tool synccheck "$BIN/test_mqa" --gtest_filter=${SAN_TEST:-MlaDecode.WgmmaSeesawP0BufSmall} > "$W/synccheck.log" 2>&1
      echo "synccheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/synccheck.log" | tr '\n' ' ') after $(el) s"
    fi
  fi
  if [ "$RC" = 0 ]; then
    echo "=== 3. same-run comparison"
    for rv in 1:12 1:$NEW 2:$NEW 2:12; do
      rep=${rv%%:*}; v=${rv##*:}
      [ "$(left)" -gt 60 ] || { echo "guard: skip v$v rep $rep"; continue; }
      timeout $(( $(left) < 100 ? $(left) : 100 )) "$BIN/bench_attn" --out "$W/cmp_v${v}_r$rep" --only mla_decode --budget 600 --mla-decode-variant $v \
        --mla-decode-point "$POINTS" > "$W/compare_v${v}_r$rep.log" 2>&1
      echo "v$v rep $rep exit $? after $(el) s"; grep -E "^== " "$W/compare_v${v}_r$rep.log"
    done
    python3 - "$W" "$NEW" <<'PY'
import json, sys, glob, os, statistics as st
W = sys.argv[1]
N = int(sys.argv[2])
t = {}
for f in glob.glob(os.path.join(W, "cmp_v*_r*", "mla_decode.json")):
    v = int(os.path.basename(os.path.dirname(f)).split("_")[1][1:])
    for r in json.load(open(f))["rows"]:
        s = r["shape"]
        t.setdefault((s["heads"], s["batch"], s["ctx"]), {}).setdefault(v, []).append((r["us_median"], r["tflops"]))
print(f"H B L | v12 reps us | v{N} reps us | v12 best us (TF/s, %peak) | v{N} best us (TF/s, %peak) | v12/v{N}")
rat = {}
for k in sorted(t, key=lambda k: (-k[0], k[1] * k[2])):
    if 12 in t[k] and N in t[k]:
        a = min(t[k][12]); b = min(t[k][N])
        rat.setdefault(k[0], []).append(a[0] / b[0])
        print(f"{k[0]} {k[1]} {k[2]} | {' '.join(f'{x[0]:.1f}' for x in t[k][12])} | {' '.join(f'{x[0]:.1f}' for x in t[k][N])} | "
              f"{a[0]:.1f} ({a[1]:.0f}, {100 * a[1] / 796.5:.1f}%) | {b[0]:.1f} ({b[1]:.0f}, {100 * b[1] / 796.5:.1f}%) | {a[0] / b[0]:.3f}")
won = []
for h in sorted(rat, reverse=True):
    med, mn = st.median(rat[h]), min(rat[h])
    ok = len(rat[h]) >= 3 and med > 1.0 and mn >= 0.97
    print(f"H={h}: v12/v{N} median {med:.3f} min {mn:.3f} n {len(rat[h])} gate {'PASS' if ok else 'fail'}")
    if ok: won.append(h)
if 128 not in won: won = []
open(os.path.join(W, "gate.txt"), "w").write(" ".join(str(h) for h in won))
print("gate heads:", won)
PY
  fi
  GATE=$(cat "$W/gate.txt" 2>/dev/null)
  if [ "$RC" = 0 ] && [ -n "$GATE" ]; then
    echo "=== 4. table rows with variant $NEW for heads: $GATE"
    for h in $GATE; do
      case $h in 128|64) ;; *) echo "H=$h: its rows are not re-measured in this call"; continue ;; esac
      [ "$(left)" -gt 50 ] || { echo "guard: no table rows for H=$h"; continue; }
      P=$(python3 -c "
import json
d = json.load(open('$TABLE'))
print(','.join(sorted({'%d:%d:%d' % (r['shape']['batch'], $h, r['shape']['ctx']) for r in d['rows']
                      if r['shape']['heads'] == $h and r['variant'].startswith('wgmma') and not r['shape']['mixed']})))")
      timeout $(( $(left) - 5 )) "$BIN/bench_attn" --out "$W/table_h$h" --only mla_decode --budget 1000 --share-scale 1.5 \
        --mla-decode-variant $NEW --mla-decode-point "$P" > "$W/table_h$h.log" 2>&1
      echo "table H=$h exit $? after $(el) s"; grep -E "^== " "$W/table_h$h.log"
    done
  fi
  if [ "$RC" = 0 ] && command -v ncu > /dev/null && [ "$(left)" -gt ${NCU_MIN:-200} ]; then
    echo "=== 5. ncu 512 x 4K H=128"
    for v in ${NCU_VARIANTS:-$NEW 12}; do
      [ "$(left)" -gt 30 ] || { echo "guard: no ncu v$v"; continue; }
      timeout $(( $(left) < 80 ? $(left) : 80 )) ncu --clock-control none -k regex:'mla_decode_seesaw_(rs|sp|p0|lz)_kernel' -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section ComputeWorkloadAnalysis --section SchedulerStats --section LaunchStats \
        --metrics smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,dram__bytes_read.sum,sm__cycles_elapsed.max \
        "$BIN/bench_attn" --out "$W/ncu_v$v" --only mla_decode --budget 20 --mla-decode-variant $v --mla-decode-point 512:128:4096 > "$W/ncu_v$v.txt" 2>&1
      echo "ncu v$v exit $? after $(el) s"
      grep -E "Duration|SM Frequency|L2 Cache Throughput|Registers|Issue Slots|No Eligible|stalled|hmma|lts__t_bytes|dram__bytes|cycles_elapsed|Executed Ipc A" "$W/ncu_v$v.txt" | head -24
    done
  fi
  echo "total $(el) s"
} 2>&1 | tee "$OUT/run.log"
cp "$W"/test_mqa.log "$OUT/" 2>/dev/null
for h in 128 96 64; do [ -s "$W/table_h$h/mla_decode.json" ] && cp "$W/table_h$h/mla_decode.json" "$OUT/table_h$h.json"; done
tar czf "$OUT/cmp.tar.gz" -C "$W" $(cd "$W" && ls -d cmp_* *.log *.txt table_h*/ 2>/dev/null)
rm -rf "$W"
exit 0
