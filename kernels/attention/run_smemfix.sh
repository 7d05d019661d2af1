#!/usr/bin/env bash
# Issue 12, smemfix: shared-space alignment of the dynamic shared memory (pointer arithmetic on the __shared__
# array instead of a uintptr_t round trip) in the BF16 MLA decode default (variant 12, mla_seesaw_rs.cuh
# <2, true>) and the MLA prefill default (variant 4, mla_prefill_wg.cu); one device call.
#   here:   bash kernels/attention/run_smemfix.sh carry   (strips + xz's test_mqa / test_mla_prefill / bench_attn of
#           $BUILD into build-carry/smemfix, with build-carry/fp8kv4/bench_attn.xz (96fee84, the old forms) as bench_old)
#   device: OUT=$OUT SERVESIM_COMMIT=<sha> [GUARD=400] bash kernels/attention/run_smemfix.sh
# Steps: 1. tests (double CPU reference): MlaDecode.WgmmaSeesawFastSoftmax* (variant 12, new form), MlaPrefill.*;
# 2. SASS LD/ST vs LDS/STS counts of the old and new kernels (cuobjdump -sass);
# 3. memcheck: MlaDecode.WgmmaSeesawFastSoftmaxSmall, MlaPrefill.WgmmaChunkWithPrefixOddLengths;
# 4. same run, 2 interleaved reps: mla_decode variant 12 at the 12 run_fp8.sh points, new form vs
#    SERVESIM_MLA_SMEM_GENERIC=1 (old form, same binary); mla_prefill variant 4 at run_prefill.sh's points,
#    new binary vs bench_old.
set -uo pipefail
if [ "${1:-}" = carry ]; then
  BUILD=${BUILD:-build-v4f}
  C=build-carry/smemfix
  rm -rf "$C" && mkdir -p "$C"
  for b in test_mqa test_mla_prefill bench_attn; do
    strip -o "$C/$b" "$BUILD/kernels/attention/$b" && xz -T2 -6 "$C/$b"
  done
  cp build-carry/fp8kv4/bench_attn.xz "$C/bench_old.xz"
  ls -la "$C"
  exit 0
fi
BIN=${BIN:-/tmp/smemfix_bin}
mkdir -p "$BIN"
for b in test_mqa test_mla_prefill bench_attn bench_old; do
  [ -x "$BIN/$b" ] || { xz -dc "build-carry/smemfix/$b.xz" > "$BIN/$b" && chmod +x "$BIN/$b"; }
done
OUT=${OUT:-/tmp/out-smemfix}
W=$OUT/work
mkdir -p "$W"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
GUARD=${GUARD:-400}
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( GUARD - $(el) )); }
CP=${COMPARE_POINTS:-256:128:2048,16:128:65536,512:128:4096,512:64:4096,128:64:32768,64:48:32768,64:32:32768,64:24:32768,64:16:32768,64:12:32768,512:96:4096,1:128:65536}
PP=${PREFILL_POINTS:-512:4096:96,1024:8192:96,2048:65536:96,4096:0:96,8192:0:96,8192:16384:96,16384:0:96,16384:32768:96,4096:0:12,4096:16384:24}
{
  echo "commit $SERVESIM_COMMIT $(date -u +%FT%TZ) guard $GUARD"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
  if [ "${MODE:-}" != bench ]; then
  echo "=== 1. tests"
  timeout ${TEST_S:-150} "$BIN/test_mqa" --gtest_filter='MlaDecode.WgmmaSeesawFastSoftmax*' > "$W/test_mqa.log" 2>&1; R1=$?
  grep -E "OK \]|FAILED|PASSED|Failure|Expected|Which is" "$W/test_mqa.log" | cut -c1-200
  echo "test_mqa exit $R1 after $(el) s; max rel_l2 $(grep -oE 'rel_l2=[0-9.e+-]+' "$W/test_mqa.log" | cut -d= -f2 | sort -g | tail -1)"
  timeout ${TEST_S:-150} "$BIN/test_mla_prefill" --gtest_filter='MlaPrefill.*' > "$W/test_mla_prefill.log" 2>&1; R2=$?
  grep -E "OK \]|FAILED|PASSED|Failure|Expected|Which is" "$W/test_mla_prefill.log" | cut -c1-200
  echo "test_mla_prefill exit $R2 after $(el) s"
  echo "=== 2. SASS (opcode counts per kernel)"
  for b in bench_attn bench_old; do
    cuobjdump -sass "$BIN/$b" | python3 -c '
import re, sys, collections
cur = None; out = {}
for l in sys.stdin:
    m = re.search(r"Function : (\S+)", l)
    if m:
        cur = m.group(1) if re.search(r"seesaw_rs_kernel|prefill_wgmma_kernel", m.group(1)) else None
        if cur: out[cur] = collections.Counter()
        continue
    if cur:
        m = re.search(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9]+)", l)
        if m:
            out[cur]["ALL"] += 1
            if m.group(1) in ("LD", "ST", "LDS", "STS", "LDSM", "STSM", "LDG", "STG", "LDL", "STL"): out[cur][m.group(1)] += 1
for k, v in out.items(): print(sys.argv[1], re.sub(r".*?_cu_[0-9a-f]+\d*", "", k)[:60], dict(sorted(v.items())))
' $b
  done
  if [ "$R1" = 0 ] && [ "$R2" = 0 ] && command -v compute-sanitizer > /dev/null; then
    echo "=== 3. memcheck"
    timeout 120 compute-sanitizer --tool memcheck --print-limit 20 "$BIN/test_mqa" --gtest_filter=MlaDecode.WgmmaSeesawFastSoftmaxSmall > "$W/memcheck_mqa.log" 2>&1
    echo "memcheck decode exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck_mqa.log" | tr '\n' ' ') after $(el) s"
    timeout 120 compute-sanitizer --tool memcheck --print-limit 20 "$BIN/test_mla_prefill" --gtest_filter=MlaPrefill.WgmmaChunkWithPrefixOddLengths > "$W/memcheck_prefill.log" 2>&1
    echo "memcheck prefill exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck_prefill.log" | tr '\n' ' ') after $(el) s"
  fi
  else
    R1=0; R2=0
    echo "=== MODE=bench: tests / memcheck skipped (call 1 ran them on the same binaries)"
    for b in bench_attn bench_old; do
      cuobjdump -sass "$BIN/$b" | awk '/Function :/ {f = ($0 ~ /prefill_wgmma_kernelILi2/)} f' | sed -E 's@/\*[0-9a-f]{4}\*/@@; s@/\* 0x[0-9a-f]+ \*/@@' | grep -vE '^\s*$' > "$W/sass_prefill2_$b.txt"
    done
    echo "prefill MODE 2 SASS lines old / new: $(wc -l < "$W/sass_prefill2_bench_old.txt") / $(wc -l < "$W/sass_prefill2_bench_attn.txt"); differing lines: $(diff "$W/sass_prefill2_bench_old.txt" "$W/sass_prefill2_bench_attn.txt" | grep -c '^[<>]')"
    diff "$W/sass_prefill2_bench_old.txt" "$W/sass_prefill2_bench_attn.txt" | head -40 | cut -c1-120
  fi
  if [ "$R1" = 0 ] && [ "$R2" = 0 ]; then
    echo "=== 4. same run"
    SEQ=${SEQ:-dnew:1 dold:1 pnew:1 pold:1 pold:2 pnew:2 dold:2 dnew:2}
    for c in $SEQ; do
      k=${c%%:*}; rep=${c##*:}
      [ "$(left)" -gt 30 ] || { echo "guard: skip $c"; continue; }
      case $k in
        dnew) SERVESIM_MLA_SMEM_GENERIC=0 timeout 100 "$BIN/bench_attn" --out "$W/cmp_${k}_r$rep" --only mla_decode --budget 100 --share-scale 2 --mla-decode-point "$CP" > "$W/${k}_r$rep.log" 2>&1 ;;
        dbin) timeout 100 "$BIN/bench_old" --out "$W/cmp_${k}_r$rep" --only mla_decode --budget 100 --share-scale 2 --mla-decode-point "$CP" > "$W/${k}_r$rep.log" 2>&1 ;;
        dold) SERVESIM_MLA_SMEM_GENERIC=1 timeout 100 "$BIN/bench_attn" --out "$W/cmp_${k}_r$rep" --only mla_decode --budget 100 --share-scale 2 --mla-decode-point "$CP" > "$W/${k}_r$rep.log" 2>&1 ;;
        pnew) timeout 100 "$BIN/bench_attn" --out "$W/cmp_${k}_r$rep" --only mla_prefill --budget 80 --share-scale 2.4 --mla-prefill-variant 4 --mla-prefill-point "$PP" > "$W/${k}_r$rep.log" 2>&1 ;;
        pold) timeout 100 "$BIN/bench_old" --out "$W/cmp_${k}_r$rep" --only mla_prefill --budget 80 --share-scale 2.4 --mla-prefill-variant 4 --mla-prefill-point "$PP" > "$W/${k}_r$rep.log" 2>&1 ;;
      esac
      echo "$c exit $? after $(el) s"
    done
    python3 - "$W" <<'PY'
import json, sys, glob, os, statistics as st
W = sys.argv[1]
t = {}
for f in glob.glob(os.path.join(W, "cmp_*_r*", "*.json")):
    c = os.path.basename(os.path.dirname(f)).split("_")[1]
    for r in json.load(open(f))["rows"]:
        s = r["shape"]
        if s.get("mixed"): continue
        k = (s["heads"], s["batch"], s["ctx"]) if c[0] == "d" else (s["heads"], s["chunk"], s["prefix"])
        t.setdefault(c[0], {}).setdefault(k, {}).setdefault(c[1:], []).append(r["us_median"])
for op, name, key in (("d", "mla_decode v12 (H B L)", lambda k: (-k[0], k[1] * k[2])), ("p", "mla_prefill v4 (H N P)", lambda k: (-k[0], k[1], k[2]))):
    if op not in t: continue
    print(f"{name} | old us (best of reps) | new us | old/new | reps old | reps new")
    rs = []
    for k in sorted(t[op], key=key):
        d = t[op][k]
        if "old" not in d or "new" not in d: continue
        o, n = min(d["old"]), min(d["new"]); rs.append(o / n)
        print(f"{k} | {o:.1f} | {n:.1f} | {o/n:.3f} | {' '.join(f'{x:.1f}' for x in d['old'])} | {' '.join(f'{x:.1f}' for x in d['new'])}")
    if "bin" in next(iter(t[op].values())):
        rb = [st.median(d["bin"]) / st.median(d["new"]) for d in t[op].values() if "bin" in d and "new" in d]
        print(f"{name}: old binary (96fee84) / new, median of reps per point: median {st.median(rb):.3f} (min {min(rb):.3f}, max {max(rb):.3f})")
    rm = [st.median(d["old"]) / st.median(d["new"]) for d in t[op].values() if "old" in d and "new" in d]
    if rm: print(f"{name}: old/new with the median of reps per point: median {st.median(rm):.3f} (min {min(rm):.3f}, max {max(rm):.3f})")
    if rs: print(f"{name}: old/new per point median {st.median(rs):.3f} (min {min(rs):.3f}, max {max(rs):.3f}) over {len(rs)} points; "
                  f"rule (median >= 1.0, no point < 0.98): {'PASS' if st.median(rs) >= 1.0 and min(rs) >= 0.98 else 'FAIL'}")
PY
  fi
  echo "total $(el) s"
} 2>&1 | tee "$OUT/run.log"
cp "$W"/test_*.log "$OUT/" 2>/dev/null
tar czf "$OUT/cmp.tar.gz" -C "$W" $(cd "$W" && ls -d cmp_* *.log 2>/dev/null)
rm -rf "$W"
exit 0
