#!/usr/bin/env bash
# Issue 12, fp8kv4: FP8-KV MLA decode variant 12 (mla_fp8_ring.cuh: variant 11's seesaw on 32-token tiles from a
# bulk-copy FP8 ring) vs variant 6 (the default) and the BF16
# kernel (mla_decode, bench default variant 12) on the device, one call.
#   here:   bash kernels/attention/run_fp8kv4.sh carry   (strips + xz's test_mla_fp8 / bench_attn of $BUILD into build-carry/fp8kv4)
#   device: OUT=$OUT SERVESIM_COMMIT=<sha> [GUARD=300] [NEW=12] [EXTRA="v13 e64 p2"] [E_TEST=64] bash kernels/attention/run_fp8kv4.sh
# Steps (each behind the time guard GUARD, seconds from the start):
#  1. test_mla_fp8 (Variant11*, DeepSeekHeadCounts: variant 6), double CPU reference;
#  2. compute-sanitizer memcheck of MlaFp8Decode.Variant12RingSmall;
#  3. same run at the 12 reference points of run_fp8.sh: v6, vNEW, vNEW, v6 (FP8) and BF16 mla_decode x 2;
#     table + gate (vNEW median time over the points < v6's) in gate.txt;
#  4. ncu (--clock-control none) of vNEW at H=64 512 x 4K (stall reasons, pipes), time permitting;
#  5. only if the gate passes and time is left: the 702-point mla_decode_fp8kv sweep with vNEW (as run_fp8.sh).
set -uo pipefail
# MODE=explore (call 2): instead of steps 1-5, test_mla_fp8 Variant11SeesawSmall under each kEarly mask
# (SERVESIM_MLA_FP8_EARLY 1 3 5 9 15), then the 12 points with v6, v11 x each mask, v11 at L2 prefetch distances
# 6 / 8 (SERVESIM_MLA_FP8_PF), 2 reps in reverse order, BF16 once; table per configuration.
if [ "${1:-}" = carry ]; then
  BUILD=${BUILD:-build-v4f}
  C=build-carry/fp8kv4
  rm -rf "$C" && mkdir -p "$C"
  for b in test_mla_fp8 bench_attn; do
    strip -o "$C/$b" "$BUILD/kernels/attention/$b" && xz -T2 -6 "$C/$b"
  done
  ls -la "$C"
  exit 0
fi
BIN=${BIN:-/tmp/fp8kv4_bin}
mkdir -p "$BIN"
for b in test_mla_fp8 bench_attn; do
  [ -x "$BIN/$b" ] || { xz -dc "build-carry/fp8kv4/$b.xz" > "$BIN/$b" && chmod +x "$BIN/$b"; }
done
OUT=${OUT:-/tmp/out-fp8kv4}
W=$OUT/work
mkdir -p "$W"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-unknown}
NEW=${NEW:-12}
GUARD=${GUARD:-300}
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( GUARD - $(el) )); }
CP=${COMPARE_POINTS:-256:128:2048,16:128:65536,512:128:4096,512:64:4096,128:64:32768,64:48:32768,64:32:32768,64:24:32768,64:16:32768,64:12:32768,512:96:4096,1:128:65536}
if [ "${MODE:-}" = explore ]; then
{
  echo "commit $SERVESIM_COMMIT $(date -u +%FT%TZ) guard $GUARD explore"
  for e in ${TEST_EARLY-1 3 5 9 15}; do
    SERVESIM_MLA_FP8_EARLY=$e timeout 60 "$BIN/test_mla_fp8" --gtest_filter=MlaFp8Decode.Variant12RingSmall > "$W/test_e$e.log" 2>&1
    echo "early $e: test exit $? $(grep -cE 'attn-test' "$W/test_e$e.log") checks, max out rel_l2 $(grep -oE 'rel_l2=[0-9.e+-]+' "$W/test_e$e.log" | cut -d= -f2 | sort -g | tail -1)"
  done
  CONFS=${CONFS:-v6 e1 e3 e5 e9 e15 p6 p8}
  export CONFS
  for rep in 1 2; do
    [ $rep = 2 ] && CONFS=$(echo $CONFS | tr ' ' '\n' | tac | tr '\n' ' ')
    for c in $CONFS; do
      [ "$(left)" -gt 20 ] || { echo "guard: skip $c"; continue; }
      case $c in
        v6) env_="" ; v=6 ;;
        e*) env_="SERVESIM_MLA_FP8_EARLY=${c#e}" ; v=$NEW ;;
        p*) env_="SERVESIM_MLA_FP8_PF=${c#p}" ; v=$NEW ;;
      esac
      env $env_ timeout 100 "$BIN/bench_attn" --out "$W/cmp_${c}_r$rep" --only mla_decode_fp8kv --budget 100 --share-scale 2 --mla-fp8-variant $v \
        --mla-decode-point "$CP" > "$W/compare_${c}_r$rep.log" 2>&1
      echo "$c rep $rep exit $? after $(el) s"
    done
  done
  timeout 100 "$BIN/bench_attn" --out "$W/cmp_bf16_r1" --only mla_decode --budget 100 --share-scale 2 --mla-decode-point "$CP" > "$W/compare_bf16_r1.log" 2>&1
  echo "bf16 exit $? after $(el) s"
  python3 - "$W" <<'PY'
import json, sys, glob, os, statistics as st
W = sys.argv[1]
t = {}
for f in glob.glob(os.path.join(W, "cmp_*_r*", "*.json")):
    c = os.path.basename(os.path.dirname(f)).split("_")[1]
    for r in json.load(open(f))["rows"]:
        s = r["shape"]
        if s.get("mixed"): continue
        t.setdefault((s["heads"], s["batch"], s["ctx"]), {}).setdefault(c, []).append(r["us_median"])
confs = os.environ["CONFS"].split() + ["bf16"]
print("H B L | " + " | ".join(confs) + "  (best of reps, us)")
for k in sorted(t, key=lambda k: (-k[0], k[1] * k[2])):
    print(f"{k[0]} {k[1]} {k[2]} | " + " | ".join(f"{min(t[k][c]):.1f}" if c in t[k] else "-" for c in confs))
for c in confs[1:]:
    r = [min(t[k]["v6"]) / min(t[k][c]) for k in t if c in t[k] and "v6" in t[k]]
    m = [min(t[k][c]) for k in t if c in t[k]]
    if r: print(f"{c}: median time {st.median(m):.1f} us; v6/{c} per point median {st.median(r):.3f} (min {min(r):.3f}, max {max(r):.3f})")
PY
  echo "total $(el) s"
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/cmp.tar.gz" -C "$W" $(cd "$W" && ls -d cmp_* *.log 2>/dev/null)
rm -rf "$W"
exit 0
fi
{
  echo "commit $SERVESIM_COMMIT $(date -u +%FT%TZ) guard $GUARD new $NEW"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
  echo "=== 1. test_mla_fp8"
  timeout ${TEST_S:-100} "$BIN/test_mla_fp8" --gtest_filter="${TEST_FILTER:-MlaFp8Decode.Variant12*:MlaFp8Decode.Variant13*:MlaFp8Decode.DeepSeekHeadCounts:MlaFp8Format.*}" > "$W/test_mla_fp8.log" 2>&1
  RC=$?
  grep -E "attn-test|OK \]|FAILED|PASSED|Failure|Expected|Which is|error" "$W/test_mla_fp8.log" | cut -c1-220
  echo "test_mla_fp8 exit $RC after $(el) s"
  if command -v cuobjdump > /dev/null; then
    echo "SASS mla_decode_fp8_ring_kernel:"; cuobjdump -sass "$BIN/test_mla_fp8" | awk '$0 ~ "Function : .*mla_decode_fp8_ring_kernel" {f=1;next} /Function :/{f=0} f' |
      grep -oE "\b(HGMMA\.[0-9x]+[^ ]*|LDG[^ ]*|STS[^ ]*|WARPGROUP[^ ;]*|LDL[^ ;]*|STL[^ ;]*|BAR\.[A-Z]+[^ ;]*|F2FP[^ ]*|HMUL2[^ ]*|SYNCS[^ ;]*)" | sort | uniq -c | tr '\n' ';'
    echo
  fi
  if [ "$RC" = 0 ] && command -v compute-sanitizer > /dev/null && [ "$(left)" -gt ${SAN_MIN:-200} ]; then
    echo "=== 2. memcheck"
    timeout ${MEM_S:-90} compute-sanitizer --tool memcheck --print-limit 20 "$BIN/test_mla_fp8" --gtest_filter=${SAN_TEST:-MlaFp8Decode.Variant12RingSmall} > "$W/memcheck.log" 2>&1
    echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$W/memcheck.log" | tr '\n' ' ') after $(el) s"
    grep -E "Invalid|out of bounds|FAILED|attn-test" "$W/memcheck.log" | head -8 | cut -c1-200
  fi
  if [ "$RC" = 0 ]; then
    echo "=== 3. same-run comparison"
    for rv in 1:6 1:$NEW 1:bf16 2:$NEW 2:6 2:bf16; do
      rep=${rv%%:*}; v=${rv##*:}
      [ "$(left)" -gt 40 ] || { echo "guard: skip $v rep $rep"; continue; }
      if [ "$v" = bf16 ]; then
        timeout 100 "$BIN/bench_attn" --out "$W/cmp_bf16_r$rep" --only mla_decode --budget 100 --share-scale 2 \
          --mla-decode-point "$CP" > "$W/compare_bf16_r$rep.log" 2>&1
      else
        timeout 100 "$BIN/bench_attn" --out "$W/cmp_v${v}_r$rep" --only mla_decode_fp8kv --budget 100 --share-scale 2 --mla-fp8-variant $v \
          --mla-decode-point "$CP" > "$W/compare_v${v}_r$rep.log" 2>&1
      fi
      echo "$v rep $rep exit $? after $(el) s"
    done
    python3 - "$W" "$NEW" <<'PY'
import json, sys, glob, os, statistics as st
W, N = sys.argv[1], sys.argv[2]
t = {}
for f in glob.glob(os.path.join(W, "cmp_*_r*", "*.json")):
    v = os.path.basename(os.path.dirname(f)).split("_")[1]
    for r in json.load(open(f))["rows"]:
        s = r["shape"]
        if s.get("mixed"): continue
        t.setdefault((s["heads"], s["batch"], s["ctx"]), {}).setdefault(v, []).append(r)
vn = "v" + N
print(f"H B L | v6 us | {vn} us | bf16 us | {vn} TB/s (% of 4.26) TF/s (% of 796.5) | v6/{vn} | {vn}/bf16")
r6, rb, s6, sn = [], [], [], []
for k in sorted(t, key=lambda k: (-k[0], k[1] * k[2])):
    d = t[k]
    if "v6" not in d or vn not in d: continue
    a = min(d["v6"], key=lambda r: r["us_median"]); b = min(d[vn], key=lambda r: r["us_median"])
    c = min(d["bf16"], key=lambda r: r["us_median"]) if "bf16" in d else None
    tb = b["tbps"]
    r6.append(a["us_median"] / b["us_median"]); s6.append(a["us_median"]); sn.append(b["us_median"])
    if c: rb.append(b["us_median"] / c["us_median"])
    print(f"{k[0]} {k[1]} {k[2]} | {a['us_median']:.1f} | {b['us_median']:.1f} | {c['us_median'] if c else float('nan'):.1f} | "
          f"{tb:.2f} ({100*tb/4.26:.0f}%) {b['tflops']:.0f} ({100*b['tflops']/796.5:.0f}%) | {a['us_median']/b['us_median']:.3f} | "
          f"{(b['us_median']/c['us_median']) if c else float('nan'):.3f}")
# gate (fp8kv4 brief): same-run per-point median of v6 / vNEW >= 1.05 over the 12 points
ok = len(sn) > 0 and st.median(r6) >= 1.05
print(f"median time over {len(sn)} points: v6 {st.median(s6):.1f} us, {vn} {st.median(sn):.1f} us; v6/{vn} per point median {st.median(r6):.3f} "
      f"(min {min(r6):.3f}, max {max(r6):.3f}); {vn}/bf16 median {st.median(rb) if rb else float('nan'):.3f}; gate {'PASS' if ok else 'FAIL'}")
open(os.path.join(W, "gate.txt"), "w").write("pass" if ok else "")
PY
  fi
  if [ "$RC" = 0 ] && [ -n "${EXTRA:-}" ]; then
    # EXTRA: configurations beside v6 (same run, 2 reps, the second in reverse order): pN = vNEW at L2 prefetch
    # distance N pages, vN = variant N, eN = variant 11 with SERVESIM_MLA_FP8_EARLY=N
    echo "=== 3b. extra configurations: $EXTRA (+ v6)"
    [ -n "${E_TEST:-}" ] && for e in $E_TEST; do
      SERVESIM_MLA_FP8_EARLY=$e timeout 60 "$BIN/test_mla_fp8" --gtest_filter=MlaFp8Decode.Variant11SeesawSmall > "$W/test_e$e.log" 2>&1
      echo "v11 early $e: Variant11SeesawSmall exit $?, max out rel_l2 $(grep -oE 'rel_l2=[0-9.e+-]+' "$W/test_e$e.log" | cut -d= -f2 | sort -g | tail -1)"
    done
    XC="v6 $EXTRA"
    for rep in 1 2; do
      [ $rep = 2 ] && XC=$(echo $XC | tr ' ' '\n' | tac | tr '\n' ' ')
      for c in $XC; do
        [ "$(left)" -gt 40 ] || { echo "guard: skip $c"; continue; }
        case $c in
          v*) env_=""; v=${c#v} ;;
          p*) env_="SERVESIM_MLA_FP8_PF=${c#p}"; v=$NEW ;;
          e*) env_="SERVESIM_MLA_FP8_EARLY=${c#e}"; v=11 ;;
        esac
        env $env_ timeout 100 "$BIN/bench_attn" --out "$W/x_${c}_r$rep" --only mla_decode_fp8kv --budget 100 --share-scale 2 --mla-fp8-variant $v \
          --mla-decode-point "$CP" > "$W/x_${c}_r$rep.log" 2>&1
        echo "$c rep $rep exit $? after $(el) s"
      done
    done
    python3 - "$W" v6 $EXTRA <<'PY'
import json, sys, glob, os, statistics as st
W = sys.argv[1]
t = {}
for c in sys.argv[2:]:
    for f in glob.glob(os.path.join(W, f"x_{c}_r*", "*.json")):
        for r in json.load(open(f))["rows"]:
            s = r["shape"]
            if s.get("mixed"): continue
            k = (s["heads"], s["batch"], s["ctx"])
            t.setdefault(c, {})[k] = min(t.get(c, {}).get(k, 1e30), r["us_median"])
cs = sys.argv[2:]
print("H B L | " + " | ".join(cs) + "  (best of 2, us)")
for k in sorted(t.get("v6", {}), key=lambda k: (-k[0], k[1] * k[2])):
    print(f"{k[0]} {k[1]} {k[2]} | " + " | ".join(f"{t[c][k]:.1f}" if k in t.get(c, {}) else "-" for c in cs))
for c in cs[1:]:
    r = [t["v6"][k] / t[c][k] for k in t.get(c, {}) if k in t.get("v6", {})]
    if r: print(f"{c}: median time {st.median(t[c].values()):.1f} us (v6 {st.median(t['v6'].values()):.1f}); v6/{c} per point median {st.median(r):.3f} (min {min(r):.3f}, max {max(r):.3f}) over {len(r)} points")
PY
  fi
  if [ "$RC" = 0 ] && command -v ncu > /dev/null && [ "$(left)" -gt ${NCU_MIN:-150} ]; then
    echo "=== 4. ncu v$NEW 512 x 4K H=64"
    timeout 80 ncu --clock-control none -k regex:'mla_decode_fp8' -c 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
      --metrics smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,dram__bytes_read.sum,sm__cycles_elapsed.max,lts__t_sector_hit_rate.pct \
      "$BIN/bench_attn" --out "$W/ncu_v$NEW" --only mla_decode_fp8kv --budget 20 --mla-fp8-variant $NEW --mla-decode-point 512:64:4096 > "$W/ncu_v$NEW.txt" 2>&1
    echo "ncu exit $? after $(el) s"
    grep -E "Duration|SM Frequency|DRAM Throughput|L2 Cache Throughput|Issue Slots|No Eligible|stalled|hmma|lts__t_bytes|dram__bytes|cycles_elapsed|hit_rate|Executed Ipc A" "$W/ncu_v$NEW.txt" | head -24
  fi
  if [ "$RC" = 0 ] && [ -s "$W/gate.txt" ] && [ "$(left)" -gt ${SWEEP_MIN:-200} ] && [ "${SWEEP:-1}" = 1 ]; then
    S=${FP8_S:-150}
    echo "=== 5. mla_decode_fp8kv sweep v$NEW ($S s) after $(el) s"
    mkdir -p "$W/tables"
    timeout -k 5 $(( S + 40 )) "$BIN/bench_attn" --out "$W/tables" --only mla_decode_fp8kv --mla-fp8-variant $NEW \
      --budget $(( S + 10 )) --share-scale $(awk "BEGIN{print $S / 70}") > "$W/bench_fp8.log" 2>&1
    echo "sweep exit $? after $(el) s"
    grep -E "^== |skipped|points" "$W/bench_fp8.log" | head -10
  fi
  echo "total $(el) s"
} 2>&1 | tee "$OUT/run.log"
cp "$W"/test_mla_fp8.log "$OUT/" 2>/dev/null
[ -s "$W/tables/mla_decode_fp8kv.json" ] && cp "$W/tables/mla_decode_fp8kv.json" "$OUT/mla_decode_fp8kv_sweep.json"
tar czf "$OUT/cmp.tar.gz" -C "$W" $(cd "$W" && ls -d cmp_* *.log *.txt 2>/dev/null)
rm -rf "$W"
exit 0
