#!/usr/bin/env bash
# Issue 12, FP8-KV MLA decode: several kernel variants in one nvidia-h200 call. test_mla_fp8 split
# by variant and run in parallel (the CPU reference is single-threaded), compute-sanitizer memcheck
# of the candidate variants (parallel), SASS counts, BF16 + each FP8 variant at the 12 reference
# points (FP8 twice, interleaved), then the mla_decode_fp8kv sweep and a full ncu report (per-SASS
# stall samples) with the fastest variant whose tests and memcheck passed (sum of the 12 medians).
# Usage (repository root, binaries built here and carried):
#   BUILD=build-attn SERVESIM_COMMIT=<sha> VARIANTS="6 4 5" CANDIDATES="6 4 5" FP8_S=150 \
#     [PICK_ALSO="6"] (variants checked in an earlier call that may win the pick) [NO_SWEEP_IF="6"] \
#     NCU_POINT=512:64:4096 WORK=/tmp/w bash kernels/attention/run_fp8_variants.sh
# -> $OUT/run.log, $OUT/tables.tar.gz (sweep table + compare tables), $OUT/logs.tar.gz
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/ncu_fp8_full.sh"
BUILD=${BUILD:-build-attn}
OUT=${OUT:-/tmp/out-attn}
BIN=$BUILD/kernels/attention
W=${WORK:-$(mktemp -d)}
mkdir -p "$W/tables/compare" "$OUT"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
VARIANTS=${VARIANTS:-4 6 7 8}
CANDIDATES=${CANDIDATES:-7 8}
CP=${COMPARE_POINTS:-256:128:2048,16:128:65536,512:128:4096,512:64:4096,128:64:32768,64:48:32768,64:32:32768,64:24:32768,64:16:32768,64:12:32768,512:96:4096,1:128:65536}
T0=$(date +%s)
# test filter of a variant: 6 (the default) runs the plain tests, the others their VariantN test
filter() { case $1 in 6) echo 'MlaFp8Format.*:MlaFp8Decode.DeepSeek*:MlaFp8Decode.K3*:MlaFp8Decode.Larger*:MlaFp8Decode.Rejects*:MlaFp8Decode.LargeQ*';; *) echo "MlaFp8Decode.Variant$1*";; esac; }
{
  echo "commit $SERVESIM_COMMIT"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv,noheader
  echo "=== test_mla_fp8 per variant (parallel)"
  for v in $VARIANTS; do
    timeout 150 "$BIN/test_mla_fp8" --gtest_filter="$(filter $v)" > "$W/test_v$v.log" 2>&1 &
  done
  timeout 120 "$BIN/test_mqa" --gtest_filter=MlaDecode.WgmmaHeadCountsAndTails > "$W/test_mqa.log" 2>&1 &
  wait
  OKV=""
  for v in $VARIANTS; do
    if grep -q "\[  PASSED  \]" "$W/test_v$v.log" && ! grep -q "FAILED" "$W/test_v$v.log"; then OKV="$OKV $v"; r=pass; else r=FAIL; fi
    echo "variant $v tests: $r; rel_l2 out $(grep -oE 'out .*rel_l2=[0-9.e+-]+' "$W/test_v$v.log" | grep -oE 'rel_l2=[0-9.e+-]+' | cut -d= -f2 | sort -g | sed -n '1p;$p' | tr '\n' ' ')lse max $(grep -E 'lse ' "$W/test_v$v.log" | grep -oE 'rel_l2=[0-9.e+-]+' | cut -d= -f2 | sort -g | tail -1)"
    grep -E "FAILED|Failure|Expected|Which is" "$W/test_v$v.log" | head -4
  done
  echo "test_mqa (MlaDecode.WgmmaHeadCountsAndTails): $(grep -cE 'attn-test' "$W/test_mqa.log") checks, $(grep -E 'PASSED|FAILED' "$W/test_mqa.log" | head -2 | tr '\n' ' ')"
  echo "tests done after $(( $(date +%s) - T0 )) s"
  MC=""
  for v in $CANDIDATES; do
    case " $OKV " in *" $v "*) ;; *) continue;; esac
    timeout 200 compute-sanitizer --tool memcheck --print-limit 20 "$BIN/test_mla_fp8" --gtest_filter="$(filter $v)" > "$W/memcheck_v$v.log" 2>&1 &
  done
  wait
  for v in $CANDIDATES; do
    [ -f "$W/memcheck_v$v.log" ] || continue
    e=$(grep -E 'ERROR SUMMARY' "$W/memcheck_v$v.log" | tr '\n' ' ')
    echo "memcheck variant $v: $e"
    grep -E "Invalid|out of bounds" "$W/memcheck_v$v.log" | head -3
    if echo "$e" | grep -q "ERROR SUMMARY: 0 errors" && grep -q "PASSED" "$W/memcheck_v$v.log"; then MC="$MC $v"; fi
  done
  echo "memcheck done after $(( $(date +%s) - T0 )) s; clean:$MC"
  if command -v cuobjdump > /dev/null; then
    cuobjdump -sass "$BIN/test_mla_fp8" > "$W/sass_all.txt"
    for v in $VARIANTS; do
      [ "$v" = 5 ] && continue
      k=$( [ "$v" = 6 ] && echo ILb1E || echo ILb0E )  # mla_decode_fp8_kernel<true> = 6, <false> = 4
      awk -v k="$k" '$0 ~ "Function : .*mla_decode_fp8_kernel" && $0 ~ k {f=1;next} /Function :/{f=0} f' "$W/sass_all.txt" > "$W/sass_v$v.sass"
      echo "--- SASS variant $v: $(grep -cE '^ +/\*[0-9a-f]+\*/' "$W/sass_v$v.sass") instructions; $(grep -oE "\b(HGMMA\.[0-9x]+[^ ]*|LDL[^ ]*|STL[^ ]*|R2UR|BAR\.[A-Z]+)" "$W/sass_v$v.sass" | sort | uniq -c | sort -rn | tr '\n' ';')"
    done
    rm -f "$W/sass_all.txt"
  fi
  echo "=== compare points"
  timeout 150 "$BIN/bench_attn" --out "$W/cmp_bf16" --only mla_decode --budget 100 --share-scale 2 --mla-decode-point "$CP" > "$W/compare_bf16.log" 2>&1
  echo "BF16 exit $?"; grep -E "^  mla_decode " "$W/compare_bf16.log" | cut -c1-190
  cp "$W/cmp_bf16/mla_decode.json" "$W/tables/compare/mla_decode_bf16_points.json"
  for rep in 1 2; do
    for v in $VARIANTS; do
      [ "$v" = 5 ] && continue
      timeout 150 "$BIN/bench_attn" --out "$W/cmp_v${v}_$rep" --only mla_decode_fp8kv --budget 100 --share-scale 2 --mla-fp8-variant $v \
        --mla-decode-point "$CP" > "$W/compare_v${v}_$rep.log" 2>&1
      echo "FP8 variant $v rep $rep exit $?"; grep -E "^  mla_decode_fp8kv " "$W/compare_v${v}_$rep.log" | cut -c1-190
      cp "$W/cmp_v${v}_$rep/mla_decode_fp8kv.json" "$W/tables/compare/mla_decode_fp8kv_v${v}_rep${rep}_points.json"
    done
  done
  BEST=$(python3 - "$W/tables/compare" "$MC ${PICK_ALSO:-}" <<'PY'
import json, sys, glob, os
d, ok = sys.argv[1], sys.argv[2].split()
best = None
for v in ok + ["4"]:
    tot = 0
    for rep in (1, 2):
        f = os.path.join(d, f"mla_decode_fp8kv_v{v}_rep{rep}_points.json")
        if not os.path.exists(f): tot = None; break
        rows = json.load(open(f))["rows"]
        tot += sum(r["us_median"] for r in rows)
    if tot is None: continue
    print(f"variant {v}: sum of medians {tot / 2:.1f} us", file=sys.stderr)
    if best is None or tot < best[0]: best = (tot, v)
print(best[1] if best else 4)
PY
)
  echo "fastest clean variant: $BEST"
  case " ${NO_SWEEP_IF:-} " in *" $BEST "*) FP8_S=0; echo "no sweep: variant $BEST's table exists";; esac
  if [ "${FP8_S:-150}" != 0 ]; then
    echo "=== mla_decode_fp8kv sweep with variant $BEST (${FP8_S:-150} s) after $(( $(date +%s) - T0 )) s"
    timeout -k 5 $(( ${FP8_S:-150} + 40 )) "$BIN/bench_attn" --out "$W/tables" --only mla_decode_fp8kv --mla-fp8-variant $BEST \
      --budget $(( ${FP8_S:-150} + 10 )) --share-scale $(awk "BEGIN{print ${FP8_S:-150} / 70}") > "$W/bench_fp8.log" 2>&1
    echo "bench exit $? after $(( $(date +%s) - T0 )) s"
    sed -n '/==== summary/,$p' "$W/bench_fp8.log" | head -20
  fi
  if [ -n "${NCU_POINT:-}" ] && command -v ncu > /dev/null; then
    for v in ${NCU_VARIANTS:-$BEST}; do
      ncu_fp8_full "$BIN" "$W" "$v" "$NCU_POINT"
    done
  fi
  echo "total $(( $(date +%s) - T0 )) s"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/tables.tar.gz" -C "$W" tables
tar czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls *.log *.txt *.sass *.csv 2>/dev/null)
