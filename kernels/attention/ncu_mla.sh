#!/usr/bin/env bash
# Nsight Compute counters of the wgmma MLA decode kernel at a few (B:H:L) points (issue 12 notes):
# DRAM bytes and throughput, L2 hit rate, tensor-pipe activity. Usage (repository root, device):
#   BUILD=build-attn OUT=/tmp/o bash kernels/attention/ncu_mla.sh 512:128:4096 512:64:4096
set -uo pipefail
BIN=${BUILD:-build-attn}/kernels/attention
OUT=${OUT:-/tmp/ncu-out}
mkdir -p "$OUT"
for pt in "$@"; do
  f=$OUT/ncu_$(echo "$pt" | tr ':' '_').log
  timeout 120 ncu --clock-control none -k regex:mla_decode_wgmma -c 1 --section SpeedOfLight \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,regex:sm__pipe_tensor_op.*cycles_active.avg.pct_of_peak_sustained_active,regex:sm__inst_executed_pipe_tensor.*sum \
    "$BIN/bench_attn" --out /tmp/ncu_tables --only mla_decode --budget 40 --mla-decode-point "$pt" > "$f" 2>&1
  echo "=== $pt exit $?"
  grep -E "dram__|lts__t_sector_hit|gpu__time|pipe_tensor|sm__throughput|DRAM Throughput|Memory Throughput|Compute \(SM\)|Duration|inst_executed_pipe_tensor|==ERR|==WARN" "$f" | head -30
done
