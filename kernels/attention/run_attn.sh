#!/usr/bin/env bash
# Runs every attention-kernel test and the benchmark sweep on the GPU machine and leaves
#   $OUT/tests.log  $OUT/bench.log  $OUT/tables.tar.gz (one JSON per op)  [$OUT/memcheck.log]
# Usage (from the repository root, binaries already built in $BUILD):
#   kernels/attention/run_attn.sh [smoke|full] [bench_budget_seconds]
# smoke: tests + compute-sanitizer memcheck of the tests + a quick bench (3 points per axis).
# Environment: ONLY="<op prefix>[,...] [...]" (space-separated op groups, one process each);
# TESTS="test_mqa test_dsv4" (test binaries to run; default all); BENCH_ARGS (extra bench_attn
# arguments, e.g. "--skip-existing costmodels/data/h200 --share-scale 3" for a coverage run);
# TOTAL_S (seconds from the script's start after which no group starts and the running one is
# given only what is left, so the script ends inside a device call's limit).
set -uo pipefail
MODE=${1:-full}
BUDGET=${2:-300}
BUILD=${BUILD:-build-kernels-attn}
OUT=${OUT:-out-attn}
BIN=$BUILD/kernels/attention
mkdir -p "$OUT"
export SERVESIM_COMMIT=${SERVESIM_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
T0=$(date +%s)
{
  echo "commit $SERVESIM_COMMIT"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
} 2>&1 | tee "$OUT/tests.log"

for t in ${TESTS:-test_kda test_mqa test_mla_prefill test_dsv4 test_proj}; do
  echo "=== $t" | tee -a "$OUT/tests.log"
  timeout 240 "$BIN/$t" 2>&1 | grep -E "attn-test|OK \]|FAILED|PASSED|SKIPPED|Failure|Expected|Which is|error|rel_l2" | tee -a "$OUT/tests.log"
done
echo "tests took $(( $(date +%s) - T0 )) s" | tee -a "$OUT/tests.log"

if [ "$MODE" = smoke ] && command -v compute-sanitizer >/dev/null; then
  declare -A F=([test_kda]='Kda.PrefillVarlenWithInitialState:States/KdaDecode.*'
                [test_mqa]='MlaDecode.MixedContextsSplitKV:V4Attn.NoSink'
                [test_mla_prefill]='MlaPrefill.ChunkWithPrefix'
                [test_dsv4]='V4Compressor.*:V4Indexer.*')
  for t in test_kda test_mqa test_mla_prefill test_dsv4; do
    echo "=== memcheck $t" >> "$OUT/memcheck.log"
    timeout 100 compute-sanitizer --tool memcheck --print-limit 20 "$BIN/$t" --gtest_filter="${F[$t]}" >> "$OUT/memcheck.log" 2>&1
    echo "exit $?" >> "$OUT/memcheck.log"
  done
  grep -E "ERROR SUMMARY|=== memcheck|^exit|Invalid" "$OUT/memcheck.log" | head -30
fi

if command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$BIN/bench_attn" | python3 kernels/attention/sass_summary.py > "$OUT/sass_summary.txt" 2>&1
fi

QUICK=""
[ "$MODE" = smoke ] && QUICK="--quick"
# One process per op group: a crash (sticky CUDA error) in one group cannot spoil the others.
# (Not named GROUPS: that is a read-only bash builtin array, assignments to it are ignored.)
# Each op's time share is fixed inside bench_attn and scaled by BUDGET.
OPGROUPS=${ONLY:-"h200_ceilings,kda_prefill,kda_decode,kda_short_conv,kda_gated_rmsnorm mla_decode,mla_prefill csa_sparse_attn_decode,hca_attn_decode,swa_attn_decode,csa_sparse_attn_prefill,hca_attn_prefill,swa_attn_prefill csa_indexer,csa_topk,csa_compressor,hca_compressor dense_proj"}
: > "$OUT/bench.log"
for grp in $OPGROUPS; do
  B=$BUDGET
  if [ -n "${TOTAL_S:-}" ]; then
    LEFT=$(( TOTAL_S - ($(date +%s) - T0) - 10 ))
    [ "$LEFT" -lt "$B" ] && B=$LEFT
    if [ "$B" -lt 5 ]; then echo "### group $grp not started: TOTAL_S reached" >> "$OUT/bench.log"; continue; fi
  fi
  echo "### group $grp (budget $B s)" >> "$OUT/bench.log"
  # bench_attn stops starting points at its budget; the timeout (SIGTERM, then KILL) only guards a hang
  timeout -k 5 $((B + 20)) "$BIN/bench_attn" --out "$OUT/tables" --budget "$B" $QUICK --only "$grp" ${BENCH_ARGS:-} >> "$OUT/bench.log" 2>&1
  echo "### group exit $? after $(( $(date +%s) - T0 )) s" >> "$OUT/bench.log"
done
tar czf "$OUT/tables.tar.gz" -C "$OUT" tables && rm -rf "$OUT/tables"
echo "=== failures / errors"
grep -E "FAILED|Failure|FAILED:" "$OUT/tests.log" "$OUT/bench.log" | head -40
echo "=== test errors"
grep "attn-test" "$OUT/tests.log"
echo "=== bench summary"
grep -E "^### group|^== |==== summary|ratio|best at|not offered|FH|kda_prefill T=" "$OUT/bench.log" | grep -v "^  "
echo "total $(( $(date +%s) - T0 )) s"
