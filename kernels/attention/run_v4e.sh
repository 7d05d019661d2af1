#!/usr/bin/env bash
# Issue 12, fifteenth session (helper v4e; from run_v4d.sh, fourteenth session): the V4 sparse attention
# kernel v4_attn_ws_kernel, one device call, under a global time guard: every phase starts only if
# GUARD (default 500 s, below the 600-s call limit) leaves it room, and its timeout is clipped to what is
# left. Phases in order: test_mqa (TEST_FILTER, default V4Attn.*, env defaults), compute-sanitizer memcheck of
# MEMCHECK_FILTER, SASS counts of the one-CTA instantiations, bench_attn at the reference points
# (long and short lists) under each CMP_ENV setting interleaved REPS times, the debug bound split
# (DBG_SPLIT=1: V4WS_DEBUG 1 no conversion / 2 no gather / 3 consumers only, F16 form, under DBG_ENV),
# NCU=1 one ncu of the F16 kernel (NCU_ENV), and -- if the tests passed -- the six V4 table sweeps (heads
# >= 64) under the first SWEEP_CANDS setting that beats BASE (see below), or under SWEEP_FORCE; ncu last.
# Usage: BIN=build-carry/v4e SERVESIM_COMMIT=<sha> bash kernels/attention/run_v4e.sh
set -uo pipefail
BIN=${BIN:-build-carry/v4e}
OUT=${OUT:-/tmp/out-attn}
W=$(mktemp -d); mkdir -p "$W/tables" "$OUT"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
CMP_ENV=${CMP_ENV:-"V4WS_QE=0 V4WS_QE=1 V4WS_F16=0,V4WS_QE=0 V4WS_F16=0,V4WS_QE=1 V4WS_F16=1,V4WS_QE=0 V4WS_F16=1,V4WS_QE=1"}
BASE=${BASE:-V4WS_QE=0}
# long lists: CSA Pro / Flash 512 x 64K (1152 / 640 rows), HCA 512 x 1M (8320), CSA 128 x 64K (B=64: < 1 wave);
# short lists: HCA 512 x 8K / 16K (192 / 256 rows), Flash 512 x 4K (window 128, HCA 160 rows),
# CSA 512 x 1K (384 rows); prefill CSA 4096 after 64K and the Flash window / HCA prefill 4096 after 0
DEC_PTS=${DEC_PTS:-128:512:65536,64:512:65536,128:512:1048576,128:64:65536,128:512:8192,128:512:16384,64:512:4096,128:512:1024}
PRE_PTS=${PRE_PTS-128:4096:65536,64:4096:0}
OPS=${OPS:-csa_sparse_attn_decode,hca_attn_decode,swa_attn_decode,csa_sparse_attn_prefill,swa_attn_prefill}
PTS=$DEC_PTS${PRE_PTS:+,$PRE_PTS}
T0=$(date +%s)
GUARD=${GUARD:-500}
el() { echo "after $(( $(date +%s) - T0 )) s"; }
left() { echo $(( GUARD - ($(date +%s) - T0) )); }
# clip a phase timeout to the time left under the guard (at least 1 s)
tl() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
room() { [ "$(left)" -ge "$1" ] || { echo "skipped (time guard: $(left) s left, needs $1) $(el)"; return 1; }; }
{
  echo "commit $SERVESIM_COMMIT"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
  OK=1
  if [ "${TESTS:-1}" = 1 ]; then
    timeout $(tl ${TEST_T:-240}) "$BIN/test_mqa" --gtest_filter="${TEST_FILTER:-V4Attn.*}" > "$W/test.log" 2>&1
    RC=$?; [ $RC = 0 ] || OK=0
    echo "test_mqa ${TEST_FILTER:-V4Attn.*} exit $RC $(el): $(grep -E '^\[ *(PASSED|FAILED|  OK) ' "$W/test.log" | tr '\n' ' ')"
    grep -E "mode=|FAILED|Failure" "$W/test.log" | sed 's/\[attn-test\] *//; s/wgmma_ws_m64_tn64//; s/bound=1.0e-02//' | head -80
    if [ -n "${MEMCHECK_FILTER-V4Attn.WarpSpecializedBothOperandForms:V4Attn.WarpSpecializedEarlyQ}" ] && room 60; then
      timeout $(tl ${MC_T:-200}) compute-sanitizer --tool memcheck --print-limit 10 "$BIN/test_mqa" \
        --gtest_filter="${MEMCHECK_FILTER-V4Attn.WarpSpecializedBothOperandForms:V4Attn.WarpSpecializedEarlyQ}" > "$W/memcheck.log" 2>&1
      RC=$?; [ $RC = 0 ] || OK=0
      echo "memcheck ${MEMCHECK_FILTER-V4Attn.WarpSpecializedBothOperandForms:V4Attn.WarpSpecializedEarlyQ} exit $RC: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$W/memcheck.log" | tr '\n' ' ') $(el)"
      grep -E -A5 "Invalid|out of bounds|Illegal|illegal" "$W/memcheck.log" | head -20
    fi
    if [ -n "${SYNCCHECK_FILTER:-}" ] && room 60; then
      timeout $(tl ${MC_T:-200}) compute-sanitizer --tool synccheck --print-limit 10 "$BIN/test_mqa" --gtest_filter="$SYNCCHECK_FILTER" > "$W/synccheck.log" 2>&1
      RC=$?; [ $RC = 0 ] || OK=0
      echo "synccheck $SYNCCHECK_FILTER exit $RC: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$W/synccheck.log" | tr '\n' ' ') $(el)"
      grep -E -A5 "hazard|Barrier|barrier" "$W/synccheck.log" | head -20
    fi
  fi
  echo "tests ok: $OK"
  cuobjdump -sass "$BIN/bench_attn" > "$W/all.sass" 2>/dev/null
  grep -oE "Function : _ZN[^ ]*v4_attn_ws_kernel[^ ]*" "$W/all.sass" | sort -u
  for k in $(grep -oE "Function : _ZN[^ ]*v4_attn_ws_kernelILi[03]ELi1ELb0ELi0ELb[01]ELb[01]E[^ ]*" "$W/all.sass" | awk '{print $3}' | sort -u); do
    awk -v k="$k" '$0 ~ "Function : "k {f=1;next} /Function :/{f=0} f' "$W/all.sass" > "$W/k.sass"
    echo "SASS $(echo "$k" | grep -oE 'ILi.*E' | head -c 40): $(wc -l < "$W/k.sass") lines"
    grep -oE "\b(HGMMA\.[0-9x]+[^ ]*|LDL[^ ]*|STL[^ ]*|LDGSTS[^ ]*|F2FP[^ ]*|HMUL2[^ ]*|PRMT|LDS[^ ]*|STS[^ ]*|BAR[^ ]*)" "$W/k.sass" | sort | uniq -c | tr '\n' ';'; echo
  done
  rm -f "$W/all.sass" "$W/k.sass"
  for rep in $(seq 1 ${REPS:-2}); do
    for e in $CMP_ENV; do
      tag=$(echo "$e" | tr ',=' '_-')
      room 40 || continue
      env $(echo "$e" | tr ',' ' ') timeout -k 5 $(tl ${BENCH_T:-60}) "$BIN/bench_attn" --out "$W/cmp_${tag}_r$rep" --only "$OPS" \
        --v4-attn-variant 3 --v4-attn-point "$PTS" --budget 60 --share-scale 3 > "$W/cmp_${tag}_r$rep.log" 2>&1
      echo "$e rep $rep exit $? $(el)"
    done
  done
  mkdir -p "$W/tables/cmp"; cp -r "$W"/cmp_* "$W/tables/cmp/" 2>/dev/null
  # best of REPS per setting and point, one line per point
  python3 - "$W" "$CMP_ENV" > "$W/cmp_table.txt" <<'PY'
import json, glob, sys
w, envs = sys.argv[1], sys.argv[2].split()
best = {}
for e in envs:
    tag = e.replace(",", "_").replace("=", "-")
    for f in glob.glob(f"{w}/cmp_{tag}_r*/*.json"):
        j = json.load(open(f))
        for r in j["rows"]:
            sh = r["shape"]
            k = (j["op"], sh.get("heads"), sh.get("batch", sh.get("chunk")), sh.get("ctx", sh.get("prefix")),
                 sh.get("rows_per_query", sh.get("rows_mean")))
            b = best.setdefault(k, {})
            if e not in b or r["us_median"] < b[e][0]:
                b[e] = (r["us_median"], r.get("tflops", 0))
print("op H B L rows | " + " | ".join(envs) + "  (us best of reps, TF/s)")
for k in sorted(best, key=lambda k: (k[0], -k[1], k[2], k[3])):
    print(" ".join(str(x if not isinstance(x, float) else round(x)) for x in k) + " | " +
          " | ".join(f"{best[k][e][0]:.1f} ({best[k][e][1]:.0f})" if e in best[k] else "-" for e in envs))
json.dump({"|".join(map(str, k)): v for k, v in best.items()}, open(f"{w}/cmp_best.json", "w"))
PY
  cat "$W/cmp_table.txt"
  if [ "${DBG_SPLIT:-1}" = 1 ]; then
    for d in 0 1 2 3; do
      room 40 || continue
      env ${DBG_ENV:-V4WS_F16=1} V4WS_DEBUG=$d timeout -k 5 $(tl 60) "$BIN/bench_attn" --out "$W/dbg$d" --only csa_sparse_attn_decode,hca_attn_decode \
        --v4-attn-variant 3 --v4-attn-point 128:512:65536,128:512:1048576 --budget 30 --share-scale 3 > "$W/dbg$d.log" 2>&1
      echo "F16 V4WS_DEBUG=$d exit $? $(el)"; grep -E "^  (csa|hca)" "$W/dbg$d.log" | awk '{printf "  %-24s %s %s\n", $1, substr($0, index($0,"{"), 56), $(NF-7)}'
    done
  fi
  # sweeps: the first of SWEEP_CANDS (CMP_ENV settings) that is faster than BASE at the 4 reference
  # points (best of REPS) and within 2% of it (or faster) at every other point; SWEEP_FORCE=<setting> forces one
  if [ "$OK" = 1 ] && [ -n "${SWEEP_CANDS:-}${SWEEP_FORCE:-}" ]; then
    PICK=${SWEEP_FORCE:-}
    if [ -z "$PICK" ]; then
      PICK=$(python3 - "$W" "$BASE" $SWEEP_CANDS <<'PY'
import json, sys
b = json.load(open(f"{sys.argv[1]}/cmp_best.json"))
base = sys.argv[2]
ref = {"csa_sparse_attn_decode|128|512|65536", "csa_sparse_attn_decode|64|512|65536",
       "hca_attn_decode|128|512|1048576", "csa_sparse_attn_prefill|128|4096|65536"}
for cand in sys.argv[3:]:
    ok, nref = True, 0
    for k, v in sorted(b.items()):
        if base not in v or cand not in v:
            continue
        r = v[base][0] / v[cand][0]
        isref = "|".join(k.split("|")[:4]) in ref
        nref += isref
        print(f"{cand} {k}: base {v[base][0]:.1f} cand {v[cand][0]:.1f} ratio {r:.3f}{' REF' if isref else ''}", file=sys.stderr)
        if r <= 1.0 if isref else r < 0.98:
            ok = False
    if ok and nref == 4:
        print(cand)
        break
PY
)
    fi
    echo "sweep with: ${PICK:-none}"
    if [ -n "$PICK" ]; then
      for op in csa_sparse_attn_decode:${CSA_S:-30}:26 hca_attn_decode:${HCA_S:-60}:20 csa_sparse_attn_prefill:${CSAP_S:-40}:30 hca_attn_prefill:${HCAP_S:-30}:22 swa_attn_decode:${SWA_S:-8}:5 swa_attn_prefill:${SWAP_S:-8}:7; do
        IFS=: read -r name secs share <<< "$op"
        if [ $(( $(date +%s) - T0 + secs + 12 )) -gt ${SWEEP_DEADLINE:-$GUARD} ]; then echo "sweep $name skipped (time) $(el)"; continue; fi
        env $(echo "$PICK" | tr ',' ' ') V4_ATTN_MIN_HEADS=${MIN_HEADS:-64} timeout -k 5 $(tl $(( secs + 30 ))) "$BIN/bench_attn" --out "$W/tables" --only "$name" \
          --budget $(( secs + 5 )) --share-scale $(awk "BEGIN{print $secs / $share}") > "$W/sweep_$name.log" 2>&1
        echo "sweep $name exit $? $(el)"; grep -E "^== |best" "$W/sweep_$name.log"
      done
    fi
  fi
  if [ "${NCU:-0}" = 1 ] && command -v ncu > /dev/null && room 50; then
    env ${NCU_ENV:-V4WS_F16=1} timeout $(tl 200) ncu --clock-control none -k regex:v4_attn_ws_kernel -c 1 --set full --import-source yes -o "$W/ncu_f16" \
      "$BIN/bench_attn" --out "$W/ncu_tables" --only csa_sparse_attn_decode --budget 20 --v4-attn-variant 3 \
      --v4-attn-point "${NCU_PT:-128:128:65536}" > "$W/ncu_run.log" 2>&1
    echo "ncu exit $? $(el)"
    ncu -i "$W/ncu_f16.ncu-rep" --print-details all > "$W/ncu_f16.log" 2>&1
    ncu -i "$W/ncu_f16.ncu-rep" --page source --csv --print-source sass > "$W/ncu_src.log" 2>&1
    grep -E "Duration|SM Frequency|Issue Slots|No Eligible|Eligible Warps|Pipe Tensor|Warp Cycles Per Issued|Registers Per|Shared Memory Configuration Size|L2 Hit|Mem Busy|Max Bandwidth|DRAM Throughput|L1/TEX Hit" "$W/ncu_f16.log" | head -30
    grep -E "^    stall_[a-z_]+ +warp|smsp__pcsamp_warps_issue_stalled" "$W/ncu_f16.log" | sort -k3 -n -r -t' ' | head -14
  fi
  echo "total $(el)"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/tables.tar.gz" -C "$W" tables
tar czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls *.log *.txt *.json 2>/dev/null)
[ -f "$W/ncu_f16.ncu-rep" ] && cp "$W/ncu_f16.ncu-rep" "$OUT/" || true
