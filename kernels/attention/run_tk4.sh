#!/usr/bin/env bash
# Issue 12, twenty-third session (helper tk4): the sparse form of the lean row select (variant 8) on the device, one call.
# `BUILD=build-v4f CARRY=build-carry/tk4 bash kernels/attention/run_tkm.sh carry` + gzip here; on the device (carry
# build-carry/tk4): copy to BIN, gunzip, chmod, then `BIN=... OUT=$OUT bash kernels/attention/run_tk4.sh`: run_tkm.sh with
#  - V4TopK.* (old and new tests), memcheck of the sparse form's small + past-max_len tests, racecheck of the small one;
#  - same run: old = TOPK_VARIANT=0 (the default: lean in its region), s0 = variant 8 with ballot ranks only
#    (TOPK_SPARSE_MAX=0), new = variant 8 (loop bound 4) at run_tkm.sh's 48 decode points + the lean region's edges;
#  - ncu of one 32K row and 192 x 8K rows, the sparse form and the lean form (instructions per key);
#  - the full csa_topk sweep under TOPK_VARIANT=8 (GATE=0: always when the tests pass; only the rows of the default's
#    lean region are merged, and only if the comparison's gate at those points passes -- decided on this machine).
# CALL=2 (after the rule change, 07ef3cf + the <= 132 x 1024-2047 extension): V4TopK.*, memcheck of the default's tests,
# same run old5 = TOPK_VARIANT=5 (filter / one-CTA radix: the old default outside the lean region) / lean = 7 / new = 0
# at the points + the extension's (ctx 4096 / 6144), ncu of the default, the csa_topk sweep with the default.
set -uo pipefail
if [ "${CALL:-1}" = 2 ]; then
  export MEM_FILTER=${MEM_FILTER:-'V4TopK.LeanRowIsTheDefault:V4TopK.RowSelectIsTheDefaultInItsRegion'} RACE_FILTER=${RACE_FILTER:-none}
  export CMP_RUNS=${CMP_RUNS:-'old5:TOPK_VARIANT=5 lean:TOPK_VARIANT=7 new:TOPK_VARIANT=0'} SWEEP_ENV=${SWEEP_ENV:-TOPK_VARIANT=0}
  export NCU_POINTS=${NCU_POINTS:-'df1:0:1:131072:1024 df192:0:192:32768:1024'}
  export CMP_EXTRA=${CMP_EXTRA:-'2:131072:1024,16:65536:1024,132:131072:1024,133:8192:1024,133:49152:1024,160:32768:1024,191:49152:2048,200:49152:1024,264:8192:1024,264:49152:1024,288:24576:1024,384:49152:512,512:24576:1024,512:49152:1024,1:4096:512,8:4096:512,32:4096:512,64:4096:512,128:4096:512,132:4096:512,1:6144:1024,1:6144:512,32:6144:1024,64:6144:512,128:6144:1024,132:6144:1024,132:6144:512,16:4096:1024,133:6144:1024,192:6144:1024'}
fi
export GATE=0 OTHER_TESTS=0 TORCH_S=0
export GUARD=${GUARD:-330} CMP_S=${CMP_S:-20} SWEEP_S=${SWEEP_S:-90} SWEEP_ENV=${SWEEP_ENV:-TOPK_VARIANT=8}
export MEM_FILTER=${MEM_FILTER:-'V4TopK.SparseRowSmallForSanitizers:V4TopK.SparseRowRowsLongerThanMaxLen'}
export RACE_FILTER=${RACE_FILTER:-'V4TopK.SparseRowSmallForSanitizers'}
export CMP_RUNS=${CMP_RUNS:-'old:TOPK_VARIANT=0 s0:TOPK_VARIANT=8,TOPK_SPARSE_MAX=0 new:TOPK_VARIANT=8'}
export CMP_EXTRA=${CMP_EXTRA:-'2:131072:1024,16:65536:1024,132:131072:1024,133:8192:1024,133:49152:1024,160:32768:1024,160:65536:1024,191:49152:2048,200:49152:1024,264:8192:1024,264:49152:1024,288:16384:1024,288:24576:1024,288:49152:1024,384:32768:1024,384:49152:512,512:24576:1024,512:49152:1024,1024:32768:1024'}
export NCU_POINTS=${NCU_POINTS:-'sp1:8:1:131072:1024 sp192:8:192:32768:1024 ln1:7:1:131072:1024 ln192:7:192:32768:1024'}
exec bash "$(dirname "$0")/run_tkm.sh"
