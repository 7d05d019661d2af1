#!/usr/bin/env bash
# Issue 12, helper mlatab (2026-12-04): re-measure costmodels/data/h200/mla_decode.json with variant 12 in the
# shared-space form (binaries of 552b15a, build-carry/smemfix), in one device call:
#   1. test_mqa MlaDecode.WgmmaSeesawFastSoftmaxSmall (sanity of the carried binary, seconds);
#   2. the mla_decode sweep exactly as mla128b's table sweep (run_mc.sh SWEEP_S=150: --budget 160
#      --share-scale 150/70, variant 12; the 11 mt* legacy rows and the 12 mixed rows come with it);
#   3. a same-run anchor at run_fp8.sh's 12 reference points: old form (SERVESIM_MLA_SMEM_GENERIC=1) vs new,
#      REPS interleaved reps (as run_smemfix.sh MODE=bench), to tell the kernel change from machine variance.
# device: OUT=$OUT SERVESIM_COMMIT=<sha of the binaries> bash kernels/attention/run_mlatab.sh
# -> $OUT/run.log, $OUT/mla_decode.json (the sweep's table), $OUT/bench_decode.log, $OUT/cmp.tar.gz
# here: python3 kernels/attention/merge_mlatab.py $OUT/mla_decode.json (header + rows into the committed table)
set -uo pipefail
BIN=${BIN:-/tmp/mlatab_bin}
mkdir -p "$BIN"
for b in test_mqa bench_attn; do
  [ -x "$BIN/$b" ] || { xz -dc "build-carry/smemfix/$b.xz" > "$BIN/$b" && chmod +x "$BIN/$b"; }
done
OUT=${OUT:-/tmp/out-mlatab}
W=$OUT/work
mkdir -p "$W"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
SWEEP_S=${SWEEP_S:-150}
REPS=${REPS:-2}
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
CP=${COMPARE_POINTS:-256:128:2048,16:128:65536,512:128:4096,512:64:4096,128:64:32768,64:48:32768,64:32:32768,64:24:32768,64:16:32768,64:12:32768,512:96:4096,1:128:65536}
{
  echo "commit $SERVESIM_COMMIT $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
  echo "=== 1. test"
  timeout 60 "$BIN/test_mqa" --gtest_filter='MlaDecode.WgmmaSeesawFastSoftmaxSmall' > "$W/test_mqa.log" 2>&1; R1=$?
  grep -E "OK \]|FAILED|PASSED" "$W/test_mqa.log" | cut -c1-200
  echo "test_mqa exit $R1 after $(el) s"
  echo "=== 2. mla_decode sweep with variant 12 (${SWEEP_S} s)"
  SERVESIM_MLA_SMEM_GENERIC=0 timeout -k 5 $(( SWEEP_S + 40 )) "$BIN/bench_attn" --out "$W/tables" --only mla_decode \
    --budget $(( SWEEP_S + 10 )) --share-scale $(awk "BEGIN{print ${SWEEP_S} / 70}") --mla-decode-variant 12 > "$W/bench_decode.log" 2>&1
  echo "bench exit $? after $(el) s"
  grep -E "^== |ratio" "$W/bench_decode.log" | head -30
  nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
  echo "=== 3. same run, old (SERVESIM_MLA_SMEM_GENERIC=1) vs new at 12 points, $REPS interleaved reps"
  SEQ=""; for r in $(seq 1 "$REPS"); do if [ $((r % 2)) = 1 ]; then SEQ="$SEQ dnew:$r dold:$r"; else SEQ="$SEQ dold:$r dnew:$r"; fi; done
  for c in $SEQ; do
    k=${c%%:*}; rep=${c##*:}
    g=0; [ "$k" = dold ] && g=1
    SERVESIM_MLA_SMEM_GENERIC=$g timeout 100 "$BIN/bench_attn" --out "$W/cmp_${k}_r$rep" --only mla_decode --budget 100 --share-scale 2 --mla-decode-point "$CP" > "$W/${k}_r$rep.log" 2>&1
    echo "$c exit $? after $(el) s"
  done
  python3 - "$W" <<'PY'
import json, sys, glob, os, statistics as st
W = sys.argv[1]
t = {}
for f in glob.glob(os.path.join(W, "cmp_*_r*", "mla_decode.json")):
    c = os.path.basename(os.path.dirname(f)).split("_")[1][1:]  # cmp_dnew_r1 -> new
    for r in json.load(open(f))["rows"]:
        s = r["shape"]
        if s.get("mixed"): continue
        t.setdefault((s["heads"], s["batch"], s["ctx"]), {}).setdefault(c, []).append(r["us_median"])
print("H B L | old us (best of reps) | new us | old/new | reps old | reps new")
rs, rm = [], []
for k in sorted(t, key=lambda k: (-k[0], k[1] * k[2])):
    d = t[k]
    if "old" not in d or "new" not in d: continue
    o, n = min(d["old"]), min(d["new"]); rs.append(o / n); rm.append(st.median(d["old"]) / st.median(d["new"]))
    print(f"{k} | {o:.1f} | {n:.1f} | {o/n:.3f} | {' '.join(f'{x:.1f}' for x in d['old'])} | {' '.join(f'{x:.1f}' for x in d['new'])}")
if rs:
    print(f"same run old/new best-of per point: median {st.median(rs):.3f} (min {min(rs):.3f}, max {max(rs):.3f}); "
          f"median-of-reps: {st.median(rm):.3f} ({min(rm):.3f}-{max(rm):.3f}) over {len(rs)} points")
PY
  echo "total $(el) s"
} 2>&1 | tee "$OUT/run.log"
cp "$W/tables/mla_decode.json" "$OUT/mla_decode.json" 2>/dev/null
cp "$W/bench_decode.log" "$OUT/" 2>/dev/null
tar czf "$OUT/cmp.tar.gz" -C "$W" $(cd "$W" && ls -d cmp_* *.log 2>/dev/null)
rm -rf "$W"
exit 0
