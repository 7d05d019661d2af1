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
#      the first and the last entry;
#   4. only if the tests passed, the GPU is an H200 (the table's card), SWEEP_S > 0 and (GATE=1) the comparison's
#      gate passed (the default not slower than the first CMP_RUNS entry at the median of the points where they differ): the full csa_topk sweep with the default (SWEEP_S s; env SWEEP_ENV) into
#      $OUT/tables, then torch.topk references (TORCH_S s, torch_ref.py --ops v4_topk) into $OUT/tables.
# SERVESIM_COMMIT (the binaries' commit) comes from build-carry/tkm/COMMIT. Logs: $OUT/run.log (summary); everything
# else (logs, cmp_v*/ and tables/ JSON) in $OUT/all.tar.gz (the call returns few files).
set -uo pipefail
if [ "${1:-}" = carry ]; then
  mkdir -p build-carry/tkm
  cp build-v4g/kernels/attention/test_dsv4 build-v4g/kernels/attention/bench_attn build-carry/tkm/
  strip build-carry/tkm/test_dsv4 build-carry/tkm/bench_attn
  git rev-parse HEAD > build-carry/tkm/COMMIT
  ls -la build-carry/tkm
  exit 0
fi
BIN=${BIN:-build-carry/tkm}
OUT=${OUT:-/tmp/out-tkm}
mkdir -p "$OUT"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-$(cat "$BIN/COMMIT" 2>/dev/null || echo unknown)}
export PYTHONUNBUFFERED=1
MEM_FILTER=${MEM_FILTER:-'V4TopK.RowSelectSmallForSanitizers:V4TopK.RowSelectCases:V4TopK.RowSelectRowsLongerThanMaxLen:V4TopK.FilterIsTheDefault'}
RACE_FILTER=${RACE_FILTER:-'V4TopK.RowSelectSmallForSanitizers'}
CMP_POINTS=${CMP_POINTS:-'1:8192:1024,1:16384:1024,1:32768:1024,1:65536:1024,1:131072:1024,8:8192:1024,8:16384:1024,8:32768:1024,8:65536:1024,8:131072:1024,32:8192:1024,32:16384:1024,32:32768:1024,32:65536:1024,32:131072:1024,64:8192:1024,64:16384:1024,64:32768:1024,64:65536:1024,64:131072:1024,128:8192:1024,128:16384:1024,128:32768:1024,128:65536:1024,128:131072:1024,192:8192:1024,192:16384:1024,192:32768:1024,192:65536:1024,192:131072:1024,256:8192:1024,256:16384:1024,256:32768:1024,256:65536:1024,256:131072:1024,512:8192:1024,512:16384:1024,512:32768:1024,512:65536:1024,512:131072:1024,32:8192:512,64:32768:512,128:131072:512,96:98304:512,48:24576:512,128:131072:2048,32:196608:1024,128:196608:1024'}
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
print("B x ctx x k | " + " | ".join(f"{v} us" for v in vs) + " | floor us | new/floor | old/new")
for key in sorted(t, key=lambda k: (k[0] * k[1], k[2])):
    d = t[key]
    b = next(iter(d.values()))[1]
    fl = b / 4.26e12 * 1e6
    cells = [f"{d[v][0]:.1f}" if v in d else "-" for v in vs]
    new = d.get(vs[-1], (None,))[0]
    old = d.get(vs[0], (None,))[0]
    print(f"{key[0]} x {key[1]} x {key[2]} | " + " | ".join(cells) + f" | {fl:.2f} | " +
          (f"{new / fl:.2f}" if new else "-") + " | " + (f"{old / new:.2f}" if new and old else "-"))
# gate (GATE=1): the sweep runs only if the default is not slower than the first entry (the previous default) at the
# median of the points where the two differ (old/new differs from 1 by more than 0.5%)
r = sorted(d[vs[0]][0] / d[vs[-1]][0] for d in t.values() if vs[0] in d and vs[-1] in d and abs(d[vs[0]][0] / d[vs[-1]][0] - 1) > 0.005)
med = r[len(r) // 2] if r else 1.0
print(f"gate: {len(r)} differing points, median old/new {med:.3f}, min {r[0] if r else 1:.3f}")
open(os.path.join(out, "gate"), "w").write("1" if med >= 1.0 else "0")
EOF
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
