#!/usr/bin/env python3
"""Headline counters per profiled kernel from `ncu -i REP --page raw --csv` (NOTES.md §23, w4k): duration, DRAM,
per-SM active cycles min / avg / max, CTAs per SM min / max, occupancy, issue, the top stall reasons per issued
instruction."""
import csv, sys, re

rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[0]
data = [r for r in rows[2:] if len(r) == len(hdr)]
ix = {h: i for i, h in enumerate(hdr)}
def g(r, k):
    i = ix.get(k)
    if i is None:
        return float("nan")
    try:
        return float(r[i].replace(",", ""))
    except ValueError:
        return float("nan")
KEYS = [("gpu__time_duration.sum", "dur"), ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram%"),
        ("dram__bytes_read.sum", "dram rd"), ("sm__cycles_active.min", "smact min"), ("sm__cycles_active.avg", "avg"),
        ("sm__cycles_active.max", "max"), ("sm__cycles_elapsed.max", "elapsed"), ("sm__ctas_launched.min", "ctas/SM min"),
        ("sm__ctas_launched.max", "max"), ("sm__ctas_launched.sum", "sum"),
        ("sm__warps_active.avg.pct_of_peak_sustained_active", "occ%"),
        ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue%"),
        ("sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active", "alu%"),
        ("smsp__warps_eligible.avg.per_cycle_active", "eligible/sched"),
        ("smsp__warps_active.avg.per_cycle_active", "active/sched"),
        ("smsp__average_warp_latency_per_inst_issued.ratio", "cyc/inst"),
        ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "hmma%")]
for r in data:
    name = r[ix.get("Kernel Name", 0)] if "Kernel Name" in ix else "?"
    short = re.sub(r".*(w4a16_decode\w*?_kernel)<([^>]*)>.*", r"\1<\2>", name)[:60]
    print("KERNEL", short, "grid", r[ix["Grid Size"]] if "Grid Size" in ix else "")
    print("  " + ", ".join("%s %s" % (n, ("%.4g" % g(r, k))) for k, n in KEYS if k in ix))
    st = []
    for k, i in ix.items():
        m = re.match(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$", k)
        if m:
            st.append((g(r, k), m.group(1)))
    st.sort(reverse=True)
    print("  stalls per issued inst: " + ", ".join("%s %.2f" % (n, v) for v, n in st[:9]))
