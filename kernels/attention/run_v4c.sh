#!/usr/bin/env bash
# Issue 12, thirteenth session (helper v4c): the F16 form of the warp-specialised V4 attention kernel
# (v4_attn variant 3, in-place producer, env V4WS_F16=1: E4M3 -> FP16 by cvt.rn.f16x2.e4m3x2, Q / K / P
# in FP16, both wgmma f16) against the BF16 kernel (V4WS_F16=0), in one device call: test_mqa
# V4Attn.WarpSpecialized + WarpSpecializedPair with F16 on (pair-off cases run it), compute-sanitizer
# memcheck of V4Attn.WarpSpecialized with F16 on, bench_attn at the reference points under each
# CMP_ENV setting (interleaved REPS times), then -- only if the tests pass and F16 is faster at every
# reference point (best of REPS) -- the six V4 table sweeps with F16 on, each only if it fits SWEEP_DEADLINE.
# Usage: BIN=build-carry/v4c SERVESIM_COMMIT=<sha> bash kernels/attention/run_v4c.sh
set -uo pipefail
BIN=${BIN:-build-attn/kernels/attention}
OUT=${OUT:-/tmp/out-attn}
W=$(mktemp -d); mkdir -p "$W/tables" "$OUT"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
CMP_ENV=${CMP_ENV:-"V4WS_F16=0 V4WS_F16=1"}
DEC_PTS=${DEC_PTS:-128:512:65536,64:512:65536,128:512:1048576}
PRE_PTS=${PRE_PTS-128:4096:65536}
OPS=csa_sparse_attn_decode,hca_attn_decode${PRE_PTS:+,csa_sparse_attn_prefill}
PTS=$DEC_PTS${PRE_PTS:+,$PRE_PTS}
T0=$(date +%s)
el() { echo "after $(( $(date +%s) - T0 )) s"; }
{
  echo "commit $SERVESIM_COMMIT"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
  OK=1
  if [ "${TESTS:-1}" = 1 ]; then
    V4WS_F16=1 timeout 150 "$BIN/test_mqa" --gtest_filter="${TEST_FILTER:-V4Attn.WarpSpecialized:V4Attn.WarpSpecializedPair}" > "$W/test_f16.log" 2>&1
    RC=$?; [ $RC = 0 ] || OK=0
    echo "test_mqa V4Attn (V4WS_F16=1) exit $RC $(el): $(grep -E 'PASSED|FAILED' "$W/test_f16.log" | tr '\n' ' ')"
    grep -E "mode=|FAILED|Failure" "$W/test_f16.log" | sed 's/\[attn-test\] *//; s/wgmma_ws_m64_tn64//; s/bound=1.0e-02//' | head -40
    if [ "$OK" = 1 ]; then
      V4WS_F16=1 timeout 120 compute-sanitizer --tool memcheck --print-limit 10 "$BIN/test_mqa" --gtest_filter="V4Attn.WarpSpecialized" > "$W/memcheck.log" 2>&1
      RC=$?; [ $RC = 0 ] || OK=0
      echo "memcheck (V4WS_F16=1) exit $RC: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tr '\n' ' ') $(el)"
      grep -E -A5 "Invalid|out of bounds|Illegal|illegal" "$W/memcheck.log" | head -20
    fi
  fi
  for f in 0 1; do
    cuobjdump -sass "$BIN/bench_attn" | awk -v k="v4_attn_ws_kernelILi0ELi1ELb0ELi0ELb0ELb${f}E" '$0 ~ "Function : .*"k {f=1;next} /Function :/{f=0} f' > "$W/f16_$f.sass"
    echo "SASS F16=$f: $(wc -l < "$W/f16_$f.sass") lines"
    grep -oE "\b(HGMMA\.[0-9x]+[^ ]*|LDL[^ ]*|STL[^ ]*|LDGSTS[^ ]*|F2FP[^ ]*|HMUL2[^ ]*|PRMT|LDS[^ ]*|STS[^ ]*)" "$W/f16_$f.sass" | sort | uniq -c | tr '\n' ';'; echo
  done
  for rep in $(seq 1 ${REPS:-2}); do
    for e in $CMP_ENV; do
      tag=$(echo "$e" | tr ',=' '_-')
      env $(echo "$e" | tr ',' ' ') timeout -k 5 ${BENCH_T:-60} "$BIN/bench_attn" --out "$W/cmp_${tag}_r$rep" --only "$OPS" \
        --v4-attn-variant 3 --v4-attn-point "$PTS" --budget 60 --share-scale 3 > "$W/cmp_${tag}_r$rep.log" 2>&1
      echo "$e rep $rep exit $? $(el)"
      grep -E "^  (csa|hca)" "$W/cmp_${tag}_r$rep.log" | awk '{printf "  %-24s %s %s\n", $1, substr($0, index($0,"{"), 56), $(NF-7)}'
    done
  done
  mkdir -p "$W/tables/cmp"; cp -r "$W"/cmp_* "$W/tables/cmp/" 2>/dev/null
  if [ "$OK" = 1 ] && [ "${SWEEP:-1}" = 1 ]; then  # sweep only if F16 is faster at every reference point
    SWEEP=$(python3 - "$W" <<'PY'
import json, glob, sys
ref = [("csa_sparse_attn_decode", 128, 512, 65536), ("csa_sparse_attn_decode", 64, 512, 65536),
       ("hca_attn_decode", 128, 512, 1048576), ("csa_sparse_attn_prefill", 128, 4096, 65536)]
def key(op, sh):
    return (op, sh.get("heads"), sh.get("batch", sh.get("chunk")), sh.get("ctx", sh.get("prefix")))
best = {}
for env in ("V4WS_F16=0", "V4WS_F16=1"):
    for f in glob.glob(f"{sys.argv[1]}/cmp_{env.replace('=', '-')}_r*/*.json"):
        j = json.load(open(f))
        for r in j["rows"]:
            k = (env,) + key(j["op"], r["shape"])
            best[k] = min(best.get(k, 1e30), r["us_median"])
ok = True
for k in ref:
    a, b = best.get(("V4WS_F16=0",) + k), best.get(("V4WS_F16=1",) + k)
    print(f"ref {k}: bf16 {a} f16 {b}" + (f" ratio {a / b:.3f} TF/s-ratio" if a and b else ""), file=sys.stderr)
    if not (a and b and b < a): ok = False
print(1 if ok else 0)
PY
)
    echo "sweep: $SWEEP"
    if [ "$SWEEP" = 1 ]; then
      for op in csa_sparse_attn_decode:${CSA_S:-30}:26 hca_attn_decode:${HCA_S:-60}:20 csa_sparse_attn_prefill:${CSAP_S:-40}:30 hca_attn_prefill:${HCAP_S:-30}:22 swa_attn_decode:${SWA_S:-8}:5 swa_attn_prefill:${SWAP_S:-8}:7; do
        IFS=: read -r name secs share <<< "$op"
        if [ $(( $(date +%s) - T0 + secs + 12 )) -gt ${SWEEP_DEADLINE:-215} ]; then echo "sweep $name skipped (time) $(el)"; continue; fi
        V4WS_F16=1 V4_ATTN_MIN_HEADS=${MIN_HEADS:-64} timeout -k 5 $(( secs + 30 )) "$BIN/bench_attn" --out "$W/tables" --only "$name" \
          --budget $(( secs + 5 )) --share-scale $(awk "BEGIN{print $secs / $share}") > "$W/sweep_$name.log" 2>&1
        echo "sweep $name exit $? $(el)"; grep -E "^== |best" "$W/sweep_$name.log"
      done
    fi
  fi
  echo "total $(el)"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/tables.tar.gz" -C "$W" tables
tar czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls *.log *.sass 2>/dev/null)
