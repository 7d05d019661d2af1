# Sourced by run_fp8.sh and run_fp8_variants.sh: a full ncu report of mla_decode_fp8 variant V at
# one decode point, with warp-state stall samples per SASS instruction (source page as CSV), and its
# headline counters on stdout.
#   ncu_fp8_full BIN W V POINT    (BIN: folder of bench_attn; W: work folder; POINT: B:H:ctx)
ncu_fp8_full() {
  local bin="$1" w="$2" v="$3" pt="$4"
  timeout 150 ncu --clock-control none -k regex:mla_decode_fp8 -c 1 --set full --import-source no \
    --section SourceCounters --section WarpStateStats -o "$w/ncu_full_v$v" -f \
    "$bin/bench_attn" --out "$w/ncu_tables" --only mla_decode_fp8kv --mla-fp8-variant "$v" --budget 40 --mla-decode-point "$pt" > "$w/ncu_full_v$v.log" 2>&1
  echo "=== ncu full variant $v at $pt exit $?"
  ncu -i "$w/ncu_full_v$v.ncu-rep" --page details --print-details all > "$w/ncu_full_v$v.txt" 2>&1
  ncu -i "$w/ncu_full_v$v.ncu-rep" --page source --csv --print-source sass > "$w/ncu_src_v$v.csv" 2>&1
  grep -E "Duration|Issue Slots Busy|Executed Ipc A|No Eligible|Warp Cycles Per Issued|Stall|Registers Per|DRAM Throughput|Memory Throughput|Tensor|L2 Cache Throughput" "$w/ncu_full_v$v.txt" | head -30
}
