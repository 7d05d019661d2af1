#!/usr/bin/env bash
# Issue 12, seventeenth session (helper tk), adapted by the eighteenth session (helper tkm) for the shared-memory row select (topk_row_kernel).
# `bash kernels/attention/run_tk.sh carry` (here, after building test_dsv4 and bench_attn in build-v4g) copies the
# two binaries, stripped (tree + carry must stay under the call's 64 MiB), to the ignored build-carry/tkm; without an
# argument (device call, carry build-carry/tkm) it runs, under a global time guard GUARD (default 330 s; each phase
# starts only with room left and its timeout is clipped to what is left), in this order:
#   1. test_dsv4 V4TopK.* (old and new top-k tests), then V4Indexer.* / V4Compressor.* (same binary);
#   2. compute-sanitizer memcheck of MEM_FILTER, racecheck of RACE_FILTER (shared-memory atomics);
#   3. a same-run comparison at CMP_POINTS (B:ctx:k decode points), one `bench_attn --only csa_topk` per entry
#      label:VAR=value[,VAR=value] of CMP_RUNS (default: old = TOPK_VARIANT=5, the seventeenth session's default; row =
#      the row select wherever max_len <= 32768 (opt-in); add new:TOPK_VARIANT=0 once a rule makes it the default) into $OUT/cmp_<label>; the summary table compares
#      the first and the last entry (CMP_EXTRA: more B:ctx:k points appended to CMP_POINTS);
#   3b. (twenty-first session) ncu of one top-k launch per NCU_POINTS entry label:variant:B:ctx:k (sections + per-SASS
#      stall samples; $OUT/ncu_<label>.{ncu-rep,txt,_sass.csv}; the hottest SASS lines printed);
#   4. only if the tests passed, the GPU is an H200 (the table's card), SWEEP_S > 0 and (GATE=1) the comparison's
#      gate passed: with three or more CMP_RUNS entries, at the points where the last one (the new default) runs another
#      kernel than the first, median old/new >= 1 and none below 0.97 (twenty-first session); with two, the default not
#      slower than the first CMP_RUNS entry at the median of the points where they differ: the full csa_topk sweep with the default (SWEEP_S s; env SWEEP_ENV) into
#      $OUT/tables, then torch.topk references (TORCH_S s, torch_ref.py --ops v4_topk) into $OUT/tables.
# SERVESIM_COMMIT (the binaries' commit) comes from build-carry/tkm/COMMIT. Logs: $OUT/run.log (summary); everything
# else (logs, cmp_v*/ and tables/ JSON) in $OUT/all.tar.gz (the call returns few files).
set -uo pipefail
if [ "${1:-}" = carry ]; then  # BUILD (build dir) and CARRY (carry dir) as env; twenty-first session: build-v4f, build-carry/tkm2
  BUILD=${BUILD:-build-v4g}; CARRY=${CARRY:-build-carry/tkm}
  mkdir -p "$CARRY"
  cp "$BUILD"/kernels/attention/test_dsv4 "$BUILD"/kernels/attention/bench_attn "$CARRY"/
  strip "$CARRY"/test_dsv4 "$CARRY"/bench_attn
  git rev-parse HEAD > "$CARRY"/COMMIT
  ls -la "$CARRY"
  exit 0
fi
BIN=${BIN:-build-carry/tkm}
OUT=${OUT:-/tmp/out-tkm}
mkdir -p "$OUT"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-$(cat "$BIN/COMMIT" 2>/dev/null || echo unknown)}
export PYTHONUNBUFFERED=1
MEM_FILTER=${MEM_FILTER:-'V4TopK.RowSelectSmallForSanitizers:V4TopK.RowSelectCases:V4TopK.RowSelectRowsLongerThanMaxLen:V4TopK.FilterIsTheDefault:V4TopK.RowSelectIsTheDefaultInItsRegion'}
RACE_FILTER=${RACE_FILTER:-'V4TopK.RowSelectSmallForSanitizers'}
CMP_POINTS=${CMP_POINTS:-'1:8192:1024,1:16384:1024,1:32768:1024,1:65536:1024,1:131072:1024,8:8192:1024,8:16384:1024,8:32768:1024,8:65536:1024,8:131072:1024,32:8192:1024,32:16384:1024,32:32768:1024,32:65536:1024,32:131072:1024,64:8192:1024,64:16384:1024,64:32768:1024,64:65536:1024,64:131072:1024,128:8192:1024,128:16384:1024,128:32768:1024,128:65536:1024,128:131072:1024,192:8192:1024,192:16384:1024,192:32768:1024,192:65536:1024,192:131072:1024,256:8192:1024,256:16384:1024,256:32768:1024,256:65536:1024,256:131072:1024,512:8192:1024,512:16384:1024,512:32768:1024,512:65536:1024,512:131072:1024,32:8192:512,64:32768:512,128:131072:512,96:98304:512,48:24576:512,128:131072:2048,32:196608:1024,128:196608:1024'}
[ -n "${CMP_EXTRA:-}" ] && CMP_POINTS="$CMP_POINTS,$CMP_EXTRA"  # extra B:ctx:k points (twenty-first session: the region's edges)
CMP_RUNS=${CMP_RUNS:-'old:TOPK_VARIANT=5 row:TOPK_VARIANT=6'}
CMP_S=${CMP_S:-15}
SWEEP_S=${SWEEP_S:-90}
TORCH_S=${TORCH_S:-50}
T0=$(date +%s)
GUARD=${GUARD:-330}
el() { echo "after $(( $(date +%s) - T0 )) s"; }
left() { echo $(( GUARD - ($(date +%s) - T0) )); }
tl() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
room() { [ "$(left)" -ge "$1" ] || { echo "$2 skipped (time guard: $(left) s left, needs $1) $(el)"; return 1; }; }
summary() { grep -E '^\[ *(PASSED|FAILED|  OK|  SKIPPED) |ERROR SUMMARY' "$1" | tr '\n' ' '; }
{
  echo "commit $SERVESIM_COMMIT"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
  OK=1
  timeout $(tl 120) "$BIN/test_dsv4" --gtest_filter='V4TopK.*' > "$OUT/topk.log" 2>&1; RC=$?; [ $RC = 0 ] || OK=0
  echo "test_dsv4 V4TopK.* exit $RC $(el): $(summary "$OUT/topk.log")"
  grep -E "Failure|FAILED|Which is|Expected|row " "$OUT/topk.log" | head -30
  grep -c "attn-test\] topk" "$OUT/topk.log"
  if [ "${OTHER_TESTS:-1}" = 1 ]; then
    timeout $(tl 60) "$BIN/test_dsv4" --gtest_filter='V4Indexer.*:V4Compressor.*' > "$OUT/other.log" 2>&1; RC=$?; [ $RC = 0 ] || OK=0
    echo "test_dsv4 V4Indexer/V4Compressor exit $RC $(el): $(summary "$OUT/other.log")"
  fi
  for tool in memcheck racecheck; do
    f=$MEM_FILTER; [ $tool = racecheck ] && f=$RACE_FILTER
    [ "$f" = none ] && continue  # MEM_FILTER / RACE_FILTER = none: that tool skipped
    if room 30 "$tool"; then
      timeout $(tl 100) compute-sanitizer --tool $tool --print-limit 10 "$BIN/test_dsv4" --gtest_filter="$f" > "$OUT/$tool.log" 2>&1
      RC=$?; [ $RC = 0 ] || OK=0
      echo "$tool $f exit $RC $(el): $(summary "$OUT/$tool.log")"
      grep -E -A5 "Invalid|out of bounds|Illegal|illegal|hazard|Race|race" "$OUT/$tool.log" | head -20
    fi
  done
  LABELS=""
  for spec in $CMP_RUNS; do  # label:VAR=value[,VAR=value]
    lab=${spec%%:*}; envs=${spec#*:}; LABELS="$LABELS $lab"
    if room $(( CMP_S + 5 )) "compare $lab"; then
      env ${envs//,/ } TOPK_POINTS=$CMP_POINTS timeout -k 5 $(tl $(( CMP_S + 30 ))) "$BIN/bench_attn" --out "$OUT/cmp_$lab" \
        --only csa_topk --budget "$CMP_S" --share-scale $(awk "BEGIN{print $CMP_S / 14}") > "$OUT/cmp_$lab.log" 2>&1
      echo "compare $lab ($envs) exit $? $(el)"
    fi
  done
  python3 - "$OUT" $LABELS <<'EOF'
import json, sys, os
out, vs = sys.argv[1], sys.argv[2:]
t = {}
for v in vs:
    p = os.path.join(out, f"cmp_{v}", "csa_topk.json")
    if os.path.exists(p):
        for r in json.load(open(p))["rows"]:
            s = r["shape"]
            t.setdefault((s["batch"], s["ctx"], s["topk"]), {})[v] = (r["us_median"], r["bytes"], r.get("kernel", ""))
print("B x ctx x k | " + " | ".join(f"{v} us" for v in vs) + " | floor us | new/floor | old/new | " + " | ".join(f"old/{v}" for v in vs[1:-1]) + " | new kernel")
for key in sorted(t, key=lambda k: (k[0] * k[1], k[2])):
    d = t[key]
    b = next(iter(d.values()))[1]
    fl = b / 4.26e12 * 1e6
    cells = [f"{d[v][0]:.1f}" if v in d else "-" for v in vs]
    new = d.get(vs[-1], (None,))[0]
    old = d.get(vs[0], (None,))[0]
    mids = [f"{old / d[v][0]:.2f}" if old and v in d else "-" for v in vs[1:-1]]
    print(f"{key[0]} x {key[1]} x {key[2]} | " + " | ".join(cells) + f" | {fl:.2f} | " +
          (f"{new / fl:.2f}" if new else "-") + " | " + (f"{old / new:.2f}" if new and old else "-") + " | " +
          " | ".join(mids) + " | " + d.get(vs[-1], (0, 0, "-"))[2])
# all points where the first and the last entry differ by more than 0.5% (information)
r = sorted(d[vs[0]][0] / d[vs[-1]][0] for d in t.values() if vs[0] in d and vs[-1] in d and abs(d[vs[0]][0] / d[vs[-1]][0] - 1) > 0.005)
med = r[len(r) // 2] if r else 1.0
print(f"all: {len(r)} differing points, median old/new {med:.3f}, min {r[0] if r else 1:.3f}")
# gate (GATE=1; twenty-first session): with three or more entries, at the points where the last entry runs another
# kernel than the first (the new default's row-select region): median old/new >= 1.0 and no point below 0.97;
# otherwise the eighteenth session's rule: median over the differing points >= 1.0
ch = sorted(d[vs[0]][0] / d[vs[-1]][0] for d in t.values() if vs[0] in d and vs[-1] in d and d[vs[0]][2] != d[vs[-1]][2])
if ch and len(vs) > 2:
    cm = (ch[len(ch) // 2] + ch[(len(ch) - 1) // 2]) / 2
    ok = cm >= 1.0 and ch[0] >= 0.97
    print(f"gate: {len(ch)} points where the new default changes the kernel: median old/new {cm:.3f}, min {ch[0]:.3f}, max {ch[-1]:.3f} -> {'pass' if ok else 'fail'}")
else:
    ok = med >= 1.0
    print(f"gate (differing points): median {med:.3f} -> {'pass' if ok else 'fail'}")
open(os.path.join(out, "gate"), "w").write("1" if ok else "0")
EOF
  # Diagnostic (twenty-first session): ncu of single top-k launches, NCU_POINTS = label:variant:B:ctx:k ... (SpeedOfLight,
  # launch / occupancy, warp states, source counters with per-SASS stall samples, memory and compute workload).
  for np in ${NCU_POINTS:-}; do
    IFS=: read -r lab var b c k <<< "$np"
    if room 25 "ncu $lab"; then
      TOPK_VARIANT=$var TOPK_POINTS=$b:$c:$k timeout -k 5 $(tl 60) ncu --clock-control none -k regex:topk --launch-skip 3 -c 1 \
        --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SourceCounters \
        --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats \
        -f -o "$OUT/ncu_$lab" "$BIN/bench_attn" --out /tmp/ncu_tables_$lab --only csa_topk --budget 4 > "$OUT/ncu_$lab.log" 2>&1
      echo "ncu $lab (variant $var, $b x $c x $k) exit $? $(el)"
      if [ -f "$OUT/ncu_$lab.ncu-rep" ]; then
        ncu -i "$OUT/ncu_$lab.ncu-rep" --page details > "$OUT/ncu_$lab.txt" 2>&1
        ncu -i "$OUT/ncu_$lab.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_${lab}_sass.csv" 2>&1
        grep -E "topk.*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Executed Ipc A" "$OUT/ncu_$lab.txt" | head -16
        python3 - "$OUT/ncu_${lab}_sass.csv" <<'PYEOF' || true
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hi = next((i for i, r in enumerate(rows) if "Source" in r), None)
if hi is None: print("  (no source page)"); sys.exit()
h = rows[hi]
def col(name):
    return next((i for i, c in enumerate(h) if c.startswith(name)), None)
cs, ct = col("Source"), col("Warp Stall Sampling (All")
if ct is None: print("  (no stall samples)", h[:12]); sys.exit()
data = [r for r in rows[hi + 1:] if len(r) > ct and r[ct].replace(".", "").isdigit()]
tot = sum(float(r[ct]) for r in data) or 1
print(f"  stall samples {tot:.0f}; top SASS lines:")
for r in sorted(data, key=lambda r: -float(r[ct]))[:14]:
    print(f"  {100 * float(r[ct]) / tot:5.1f}%  {r[cs][:90]}")
PYEOF
      fi
    fi
  done
  H200=0; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && H200=1
  GATED=1; [ "${GATE:-0}" = 1 ] && [ "$(cat "$OUT/gate" 2>/dev/null)" != 1 ] && GATED=0
  if [ "$OK" = 1 ] && [ "$H200" = 1 ] && [ "$GATED" = 1 ] && [ "$SWEEP_S" != 0 ] && room $(( SWEEP_S + 20 )) "csa_topk sweep"; then
    env ${SWEEP_ENV:-} timeout -k 5 $(tl $(( SWEEP_S + 40 ))) "$BIN/bench_attn" --out "$OUT/tables" --only csa_topk \
      --budget $(( SWEEP_S + 10 )) --share-scale $(awk "BEGIN{print $SWEEP_S / 14}") > "$OUT/sweep.log" 2>&1
    echo "csa_topk sweep exit $? $(el)"; grep -E "ratio|done|skipped|failed" "$OUT/sweep.log" | head -5
    if [ "$TORCH_S" != 0 ] && room $(( TORCH_S / 2 + 20 )) "torch"; then
      timeout -k 5 $(tl $(( TORCH_S + 40 ))) python3 kernels/attention/torch_ref.py --out "$OUT/tables" --budget "$TORCH_S" \
        --ops v4_topk > "$OUT/torch.log" 2>&1
      echo "torch exit $? $(el)"; grep -vE "^\s*$" "$OUT/torch.log" | tail -3
    fi
  else
    echo "no sweep (tests ok $OK, H200 $H200, gate $GATED, SWEEP_S $SWEEP_S)"
  fi
  echo "tests ok: $OK total $(el)"
} 2>&1 | tee "$OUT/run.log"
(cd "$OUT" && tar czf /tmp/tkm-all.tar.gz --exclude=run.log . ; mv /tmp/tkm-all.tar.gz all.tar.gz && find . -mindepth 1 ! -name run.log ! -name all.tar.gz -delete)
