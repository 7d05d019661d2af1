#!/usr/bin/env bash
# Coverage run (one nvidia-h200 device call): the shapes the default deployments' large prefill
# steps asked the fitted cost model for outside the measured range (README "Cost models"), in
# order of their share of the step time:
#   1. routed experts, W4A16 grouped GEMM at the experts per GPU of the defaults (K3 EP32: 28,
#      V4-Pro EP16: 24), rows per GPU up to 98,304 (bench_moe --w4-experts / --w4-max-rows);
#   2. K3 KDA projections split over attention TP 8/4/2 (bench_attn --proj-tp);
#   3. K3 shared expert split over attention TP 8/4/2: SiTU at I = 768/1536/3072 and its two GEMMs
#      (bench_moe --shared-tp);
#   4. K3 MLA prefill attention at 12/24/48 heads per GPU (bench_attn --mla-heads);
#   5. K3 MLA projections split over attention TP 8/4/2.
# The tests of the kernels timed here run first (W4A16 rows are labelled verified only when every
# W4A16 test of variant 4, the committed tables' variant, passed). Each step gets what is left of
# TOTAL_S (no step starts with less than 5 s), so the script ends inside the device call's limit.
# RUN=3 (coverage run 3) instead measures what the default K3 deployment's prefill still asked for
# outside the measured range after run 2: the kv_b up-projection over every cached token of a
# chunked prefill (M = Σ context up to 1M, attention TP 8/4/2/1) and MLA prefill at 12/24/48 heads
# up to 6e13 FLOP at that head count (run 2 stopped at the 96-head bound), both --skip-existing.
# Usage (repository root; binaries of the commit in $BUILD/kernels/{moe,attention}):
#   BUILD=<dir> OUT=/tmp/out TOTAL_S=270 [RUN=3] bash kernels/run_coverage.sh
# -> $OUT/run.log, $OUT/tables.tar.gz (one JSON per op, new rows only), $OUT/logs.tar.gz
set -uo pipefail
case "${RUN:-2}" in 2|3) ;; *) echo "run_coverage.sh: RUN must be 2 or 3 (got ${RUN})" >&2; exit 2 ;; esac
BUILD=${BUILD:-build-cov2-carry}
OUT=${OUT:-/tmp/cov-out}
TOTAL_S=${TOTAL_S:-270}
W=$(mktemp -d)
TAB=$W/tables
mkdir -p "$TAB" "$OUT"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
MOE=$BUILD/kernels/moe
ATT=$BUILD/kernels/attention
T0=$(date +%s)
left() { echo $(( TOTAL_S - ($(date +%s) - T0) )); }
# step NAME PERCENT CMD...: runs CMD with @B@ replaced by its budget, PERCENT of the seconds left
# (the benchmark stops starting points at it; the timeout only guards a hang)
step() {
  local name=$1 pct=$2 l B a; shift 2
  l=$(left)
  B=$(( l * pct / 100 ))
  if [ "$B" -lt 5 ]; then echo "### $name not started: $l s left"; return; fi
  local args=()
  for a in "$@"; do [ "$a" = @B@ ] && a=$B; args+=("$a"); done
  echo "### $name (budget $B s, $(( $(date +%s) - T0 )) s in)"
  timeout -k 5 $(( B + 30 )) "${args[@]}" > "$W/$name.log" 2>&1
  echo "### $name exit $? after $(( $(date +%s) - T0 )) s"
}
{
  echo "commit $SERVESIM_COMMIT"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
  if [ "${RUN:-2}" = 3 ]; then
  TESTS_OK=1
  for t in test_mla_prefill test_proj; do
    timeout 60 "$ATT/$t" > "$W/$t.txt" 2>&1
    rc=$?
    echo "$t exit $rc: $(grep -E '^\[  PASSED|^\[  FAILED' "$W/$t.txt" | tr '\n' ' ')"
    [ "$rc" = 0 ] || TESTS_OK=0
  done
  echo "tests took $(( $(date +%s) - T0 )) s"
  # rows of kernels whose tests failed are not measurements of a correct kernel: stop here
  [ "$TESTS_OK" = 1 ] || { echo "### kernel tests failed: nothing measured"; TOTAL_S=0; }
  step kv_b 15 "$ATT/bench_attn" --out "$TAB" --only dense_proj_k3_mla --proj-tp 8,4,2,1 --proj-gemms kv_b --proj-m-max 1048576 \
    --skip-existing costmodels/data/h200 --budget @B@ --share-scale 10
  step mla_prefill 95 "$ATT/bench_attn" --out "$TAB" --only mla_prefill --mla-heads 12,24,48 --skip-existing costmodels/data/h200 \
    --budget @B@ --share-scale 10
  else
  timeout 90 "$MOE/test_moe" --gtest_filter='*W4A16*:MoeAct.*:MoeHost.*' > "$W/test_moe.txt" 2>&1
  echo "test_moe exit $?: $(grep -cE '^\[       OK' "$W/test_moe.txt") ok, $(grep -cE '^\[  FAILED' "$W/test_moe.txt") failed lines"
  W4OK=$(awk '/^w4a16 v=4 /{n++; if ($NF+0 >= 1e-2 || $NF ~ /nan/) bad=1} END{print (n >= 13 && !bad) ? 1 : 0}' "$W/test_moe.txt")
  echo "W4A16 variant 4 passed all its tests: $W4OK"
  for t in test_mla_prefill test_proj; do
    timeout 60 "$ATT/$t" > "$W/$t.txt" 2>&1
    echo "$t exit $?: $(grep -E '^\[  PASSED|^\[  FAILED' "$W/$t.txt" | tr '\n' ' ')"
  done
  grep -hE "attn-test" "$W"/test_mla_prefill.txt "$W"/test_proj.txt | head -20
  echo "tests took $(( $(date +%s) - T0 )) s"
  W4ARG=""; [ "$W4OK" = 1 ] && W4ARG="--w4-variants 4"
  step w4a16 30 "$MOE/bench_moe" --out "$TAB" --only moe_grouped_gemm_w4a16 --models K3,DSV4-Pro --w4-experts 28,24 \
    --w4-max-rows 98304 --deadline-s @B@ $W4ARG
  step proj_kda 35 "$ATT/bench_attn" --out "$TAB" --only dense_proj_k3_kda --proj-tp 8,4,2 --budget @B@ --share-scale 10
  step shared 25 "$MOE/bench_moe" --out "$TAB" --only moe_act_situ,moe_shared_expert --shared-tp 8,4,2 --deadline-s @B@
  step mla_prefill 45 "$ATT/bench_attn" --out "$TAB" --only mla_prefill --mla-heads 12,24,48 --budget @B@ --share-scale 10
  step proj_mla 95 "$ATT/bench_attn" --out "$TAB" --only dense_proj_k3_mla --proj-tp 8,4,2 --budget @B@ --share-scale 10
  fi
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
} 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/tables.tar.gz" -C "$W" tables
tar czf "$OUT/logs.tar.gz" -C "$W" --exclude tables .
echo "=== failures"
grep -hE "FAILED|Failure|FAILED:|ERROR|fatal" "$W"/*.txt "$W"/*.log | head -20
echo "=== bench ends"
grep -hE "^== |SKIPPED|section .* took|not offered|summary \(" "$W"/*.log | head -40
for f in "$TAB"/*.json; do echo "$(basename "$f"): $(grep -c '"variant"' "$f") rows"; done
echo "total $(( $(date +%s) - T0 )) s"
