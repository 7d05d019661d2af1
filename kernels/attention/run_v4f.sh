#!/usr/bin/env bash
# Issue 12, sixteenth session (helper v4f): 16-B producer gathers from 592-B pool rows (V4WS_V16) of
# v4_attn_ws_kernel. `bash kernels/attention/run_v4f.sh carry` (here, after the build in build-v4f) copies the
# binaries to the ignored build-carry/v4f; without an argument (device call, carry build-carry/v4f) it runs
# run_v4e.sh with this session's settings: the V16 tests, memcheck + synccheck of the short-list V16 test,
# default vs V4WS_V16=1 at the reference points (REPS interleaved), the six sweeps under V4WS_V16=1 if it
# wins at the 4 reference points (within 2% elsewhere), ncu of V4WS_V16=1 last; all under GUARD.
set -uo pipefail
if [ "${1:-}" = carry ]; then
  mkdir -p build-carry/v4f
  cp build-v4f/kernels/attention/test_mqa build-v4f/kernels/attention/bench_attn build-carry/v4f/
  git rev-parse --short HEAD > build-carry/v4f/COMMIT
  ls -la build-carry/v4f
  exit 0
fi
BIN=${BIN:-build-carry/v4f} \
SERVESIM_COMMIT=${SERVESIM_COMMIT:-$(cat build-carry/v4f/COMMIT 2>/dev/null || echo unknown)} \
TEST_FILTER=${TEST_FILTER:-'V4Attn.WarpSpecialized16BGather:V4Attn.WarpSpecialized16BGatherLong:V4Attn.PoolRowBytesFollowTheForm:V4Attn.NoSink:V4Attn.StagedEpilogueDefaultIsUnsplitLaunchesOnly'} \
MEMCHECK_FILTER=${MEMCHECK_FILTER-'V4Attn.WarpSpecialized16BGather'} \
SYNCCHECK_FILTER=${SYNCCHECK_FILTER-'V4Attn.WarpSpecialized16BGather'} \
CMP_ENV=${CMP_ENV:-'V4WS_DEFAULT=1 V4WS_V16=1'} BASE=${BASE:-'V4WS_DEFAULT=1'} SWEEP_CANDS=${SWEEP_CANDS-'V4WS_V16=1'} \
REPS=${REPS:-3} DBG_SPLIT=${DBG_SPLIT:-0} NCU=${NCU:-1} NCU_ENV=${NCU_ENV:-V4WS_V16=1} GUARD=${GUARD:-480} \
bash kernels/attention/run_v4e.sh
