#!/usr/bin/env bash
# Issue 12, tenth / eleventh sessions (helpers mla128, mla128b): new seesaw MLA decode variants
# against variants 0 and 10 (the table kernel) in one device call:
# MlaDecode tests (every variant, double CPU reference), compute-sanitizer memcheck + synccheck of
# the new tests, SASS counts of the seesaw kernels (wgmma serialisation shows as WARPGROUP.ARRIVE /
# DEPBAR between HGMMAs), then the variants at the reference points of run_seesaw.sh, run twice
# interleaved (best of 2 per point), ncu of the variants at H=128, 512 x 4K, and -- only if
# SWEEP_S > 0, the tests and sanitizers passed and variant $NEW is >= SWEEP_MIN x faster than
# variant 0 (median over the H=128 points) -- the mla_decode sweep with variant $NEW.
# Usage (repository root; binaries in $BUILD/kernels/attention):
#   BUILD=build-attn OUT=/tmp/out SERVESIM_COMMIT=<sha> [VARIANTS="0 4 6 7" (V, V:nl = variant V with
#   SERVESIM_MLA_NOLOAD=1, a timing diagnostic; V:old = variant V of the binary $OLD_BENCH, e.g. the
#   previous commit's bench_attn, for a before / after check of an unchanged kernel)] [BASE=10: ratios vBASE / vX] [NEW=6] [NEW_TESTS=gtest filter run first] [OTHER_TESTS=filter] [NCU_VARIANTS="0 4 6"]
#   [POINTS=B:H:L,...] [SWEEP_S=0] [SWEEP_MIN=1.08] [SANITIZE=1] [REPS=2] [SASS_OF=mangled-name part -> $OUT/sass_kernel.txt]
#   bash kernels/attention/run_mc.sh
# -> $OUT/run.log, $OUT/cmp.tar.gz (bench tables + logs), $OUT/ncu.txt, $OUT/tables.tar.gz (sweep)
set -uo pipefail
BUILD=${BUILD:-build-attn}
OUT=${OUT:-/tmp/out-mc}
BIN=$BUILD/kernels/attention
W=$(mktemp -d)
mkdir -p "$OUT" "$W/tables"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
export NEW=${NEW:-6}
POINTS=${POINTS:-128:128:4096,256:128:2048,16:128:65536,512:128:4096,64:128:8192,512:64:4096,128:96:4096,256:96:2048,64:16:32768,128:32:4096}
VARIANTS=${VARIANTS:-0 4 6 7}
T0=$(date +%s)
{
  echo "commit $SERVESIM_COMMIT $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
  NEWT=${NEW_TESTS:-MlaDecode.WgmmaSeesawCluster:MlaDecode.WgmmaSeesawS1Reorder}
  echo "=== test_mqa $NEWT (first, short timeout: a cluster deadlock would hang)"
  timeout ${NEW_TIMEOUT:-90} "$BIN/test_mqa" --gtest_filter="$NEWT" > "$W/test_mqa_new.log" 2>&1
  RC=$?
  grep -E "attn-test|OK \]|FAILED|PASSED|Failure|Expected|Which is|error|variant 6" "$W/test_mqa_new.log" | cut -c1-200
  echo "new tests exit $RC after $(( $(date +%s) - T0 )) s"
  if [ "$RC" = 0 ]; then
    echo "=== test_mqa MlaDecode.* (the others)"
    timeout 300 "$BIN/test_mqa" --gtest_filter="${OTHER_TESTS:-MlaDecode.*-$NEWT}" > "$W/test_mqa.log" 2>&1
    RC=$?
    grep -E "OK \]|FAILED|PASSED|Failure|Expected|Which is|error" "$W/test_mqa.log" | cut -c1-200
  fi
  echo "test_mqa exit $RC after $(( $(date +%s) - T0 )) s"
  SAN_OK=1
  if [ "$RC" = 0 ] && [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer > /dev/null; then
    F=${MEMCHECK_FILTER:-$NEWT}
    timeout 200 compute-sanitizer --tool memcheck --print-limit 20 "$BIN/test_mqa" --gtest_filter="$F" > "$W/memcheck.log" 2>&1
    echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tr '\n' ' ')"
    grep -q "ERROR SUMMARY: 0 errors" "$W/memcheck.log" || SAN_OK=0
    grep -E "Invalid|out of bounds|Error" "$W/memcheck.log" | head -5
    timeout 200 compute-sanitizer --tool synccheck "$BIN/test_mqa" --gtest_filter="$F" > "$W/synccheck.log" 2>&1
    echo "synccheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/synccheck.log" | tr '\n' ' ')"
    grep -q "ERROR SUMMARY: 0 errors" "$W/synccheck.log" || SAN_OK=0
    grep -E "Error|divergent|hazard" "$W/synccheck.log" | head -5
    echo "sanitizers done after $(( $(date +%s) - T0 )) s (ok=$SAN_OK)"
  fi
  if command -v cuobjdump > /dev/null; then
    cuobjdump -sass "$BIN/test_mqa" > "$W/sass_all.txt"
    [ -n "${SASS_OF:-}" ] && awk -v k="$SASS_OF" '/Function : /{f = index($0, k) > 0} f' "$W/sass_all.txt" > "$OUT/sass_kernel.txt"
    for k in ${SASS_KEYS:-seesaw_rs_kernelILi0E seesaw_rs_kernelILi1E seesaw_rs_kernelILi2E}; do
      echo "SASS $k: $(awk -v k="$k" '/Function : /{f = index($0, k) > 0; next} f' "$W/sass_all.txt" |
        grep -oE "\b(HGMMA\.[0-9x]+[^ ]*|UTMALDG[^ ;]*|WARPGROUP[^ ;]*|SYNCS[^ ;]*|LDL[^ ;]*|STL[^ ;]*)" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
    done
  fi
  if [ "$RC" = 0 ]; then
    for rep in $(seq 1 ${REPS:-2}); do
      for vv in $VARIANTS; do  # V or V:PF (variant V with SERVESIM_MLA_PF=PF, labelled VpPF)
        v=${vv%%:*}; lab=$v; pfenv=""; bb="$BIN/bench_attn"
        if [ "$vv" != "$v" ]; then lab="${v}p${vv#*:}"; pfenv="SERVESIM_MLA_PF=${vv#*:}"; fi
        if [ "${vv#*:}" = nl ]; then lab="${v}pnl"; pfenv="SERVESIM_MLA_NOLOAD=1"; fi  # V:nl = no page reloads (diagnostic)
        if [ "${vv#*:}" = old ]; then lab="${v}pold"; pfenv=""; bb="$OLD_BENCH"; fi  # V:old = the older binary
        env $pfenv timeout 100 "$bb" --out "$W/cmp_v${lab}_r$rep" --only mla_decode --budget 60 --mla-decode-variant $v \
          --mla-decode-point "$POINTS" > "$W/compare_v${lab}_r$rep.log" 2>&1
        echo "compare variant $vv rep $rep exit $?"; grep -E "variant 6:" "$W/compare_v${lab}_r$rep.log" | head -1
      done
    done
    python3 - "$W" <<'PY'
import json, sys, glob, os, statistics as st
W = sys.argv[1]
NEWV = os.environ.get("NEW", "6")
t = {}
for f in glob.glob(os.path.join(W, "cmp_v*_r*", "mla_decode.json")):
    v = os.path.basename(os.path.dirname(f)).split("_")[1][1:]
    for r in json.load(open(f))["rows"]:
        s = r["shape"]
        k = (s["heads"], s["batch"], s["ctx_mean"])
        t.setdefault(k, {}).setdefault(v, []).append(r["us_median"])
vs = sorted({v for k in t for v in t[k]}, key=lambda x: (int(x.split("p")[0]), x))
BASE = os.environ.get("BASE", "10")
print("best of reps, us (TF/s = 2 H B L (576+512) / t)")
print("H B L | " + " | ".join(f"v{v}" for v in vs) + f" | v0/v{NEWV} | v4/v{NEWV} | " + " | ".join(f"v{BASE}/v{v}" for v in vs if v != BASE))
rb = {}
rat = {}
for k in sorted(t):
    H, B, L = k
    fl = 2.0 * H * B * L * (576 + 512)
    best = {v: min(t[k][v]) for v in t[k]}
    cells = [f"{best[v]:.1f} ({fl / best[v] / 1e6:.0f})" if v in best else "-" for v in vs]
    r0 = best["0"] / best[NEWV] if "0" in best and NEWV in best else float("nan")
    r4 = best["4"] / best[NEWV] if "4" in best and NEWV in best else float("nan")
    rat.setdefault(H, []).append(r0)
    rx = {v: best[BASE] / best[v] for v in best if v != BASE and BASE in best}
    for v in rx: rb.setdefault((H, v), []).append(rx[v])
    print(f"{H} {B} {L} | " + " | ".join(cells) + f" | {r0:.3f} | {r4:.3f} | " + " | ".join(f"{rx[v]:.3f}" if v in rx else "-" for v in vs if v != BASE))
    print("   all reps: " + "; ".join(f"v{v} " + "/".join(f"{x:.1f}" for x in t[k][v]) for v in vs if v in t[k]))
for h in sorted(rat):
    print(f"H={h}: speed-up v0/v{NEWV} median {st.median(rat[h]):.3f}; " + "; ".join(f"v{BASE}/v{v} median {st.median(rb[(hh, v)]):.3f}" for (hh, v) in sorted(rb) if hh == h))
NEWB = os.environ.get("NEW_VS_BASE_MIN", "")
if NEWB and (128, NEWV) in rb:  # sweep gate against the base variant instead of variant 0
    ok = st.median(rb[(128, NEWV)]) >= float(NEWB)  # t(vBASE) / t(vNEW) = speed-up of vNEW
    open(os.path.join(W, "new_faster"), "w").write("1" if ok else "0")
    print(f"gate: v{NEWV} vs v{BASE} at H=128: {'pass' if ok else 'fail'} (needs t(v{BASE}) / t(v{NEWV}) >= {float(NEWB):.3f})")
    sys.exit(0)
ok = 128 in rat and st.median(rat[128]) >= float(os.environ.get("SWEEP_MIN", "1.08"))
open(os.path.join(W, "new_faster"), "w").write("1" if ok else "0")
PY
  fi
  if [ "$RC" = 0 ] && [ -n "${NCU_VARIANTS:-0 4 6}" ] && command -v ncu > /dev/null; then
    for v in ${NCU_VARIANTS:-0 4 6}; do
      timeout 120 ncu --clock-control none -k regex:'mla_decode_(wgmma|seesaw)' -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis --section SchedulerStats \
        --metrics dram__bytes_read.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,regex:sm__pipe_tensor_op.*cycles_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio \
        ${NCU_EXTRA:-} "$BIN/bench_attn" --out "$W/ncu_v$v" --only mla_decode --budget 20 --mla-decode-variant $v --mla-decode-point 512:128:4096 > "$W/ncu_v$v.txt" 2>&1
      echo "ncu v$v exit $?"; grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|Memory Throughput|Registers|Issue Slots|No Eligible|Stall|Tensor|Pipe|Cluster|L2 Hit|Mem Busy|Max Bandwidth|dram__|lts__|pipe_tensor|stalled" "$W/ncu_v$v.txt" | grep -vE " 0$|\s0\.0[0-4]$" | head -44
    done
    cat "$W"/ncu_v*.txt > "$OUT/ncu.txt"
  fi
  if [ "$RC" = 0 ] && [ "$SAN_OK" = 1 ] && [ "${SWEEP_S:-0}" != 0 ] && [ "$(cat "$W/new_faster" 2>/dev/null)" = 1 ]; then
    echo "=== mla_decode sweep with variant $NEW (${SWEEP_S} s)"
    timeout -k 5 $(( SWEEP_S + 40 )) "$BIN/bench_attn" --out "$W/tables" --only mla_decode \
      --budget $(( SWEEP_S + 10 )) --share-scale $(awk "BEGIN{print ${SWEEP_S} / 70}") --mla-decode-variant $NEW > "$W/bench_decode.log" 2>&1
    echo "bench exit $? after $(( $(date +%s) - T0 )) s"
    grep -E "^== |ratio" "$W/bench_decode.log" | head -30
  fi
  echo "total $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/cmp.tar.gz" -C "$W" $(cd "$W" && ls -d cmp_* *.log 2>/dev/null)
[ -s "$W/tables/mla_decode.json" ] && tar czf "$OUT/tables.tar.gz" -C "$W" tables
exit 0
