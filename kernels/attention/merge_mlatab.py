#!/usr/bin/env python3
"""Issue 12, helper mlatab: put a fresh mla_decode sweep (bench_attn --only mla_decode, run_mlatab.sh) into
costmodels/data/h200/mla_decode.json as the earlier table commits did: header fields commit / gpu from the sweep,
the committed description (edited by hand for the variant), every row from the sweep with the sweep's commit
appended to the row (the committed rows carry it), JSON with indent 1 in the sweep's key order.
Refuses unless the sweep has exactly the committed (variant, shape) points in the same order (the fit must see
the same points). Writes the per-row old / new us_median ratios to RATIOS (TSV).
usage: merge_mlatab.py NEW.json [TABLE] [RATIOS] [--write]"""
import json, statistics as st, sys, collections

args = [a for a in sys.argv[1:] if not a.startswith("--")]
new_path = args[0]
table = args[1] if len(args) > 1 else "costmodels/data/h200/mla_decode.json"
ratios = args[2] if len(args) > 2 else "kernels/attention/results/mlatab/ratios.tsv"
old = json.load(open(table))
new = json.load(open(new_path))
key = lambda r: (r["variant"], json.dumps(r["shape"], sort_keys=True))
ko, kn = [key(r) for r in old["rows"]], [key(r) for r in new["rows"]]
if ko != kn:
    sys.exit(f"grid differs: {len(ko)} committed vs {len(kn)} new rows; only committed {len(set(ko) - set(kn))}, only new {len(set(kn) - set(ko))}")
sha = new["commit"]
out = dict(old)
out["commit"] = sha
out["gpu"] = new["gpu"]
out["description"] = old["description"].replace(
    "S1 issued after S0's first column blocks; issue 12 eleventh session, kernels/attention/NOTES.md)",
    "S1 issued after S0's first column blocks, dynamic shared memory kept in the shared address space (552b15a); "
    "issue 12 eleventh session, re-measured by helper mlatab 2026-12-04, kernels/attention/NOTES.md)")
for k in ("byte_formula", "flop_formula", "method", "model", "op", "schema"):
    if old[k] != new[k]:
        sys.exit(f"header field {k} differs")
rows = []
for r in new["rows"]:
    r = dict(r)
    r["commit"] = sha
    rows.append(r)
out["rows"] = rows
lines = ["variant\theads\tbatch\tctx\tmixed\ttiming_old\ttiming_new\tus_old\tus_new\told_over_new"]
rat = collections.defaultdict(list)
for o, n in zip(old["rows"], rows):
    s = o["shape"]
    q = o["us_median"] / n["us_median"]
    rat[o["variant"]].append(q)
    rat["all"].append(q)
    lines.append(f"{o['variant']}\t{s['heads']}\t{s['batch']}\t{s['ctx']}\t{int(s['mixed'])}\t{o['timing']}\t{n['timing']}\t"
                 f"{o['us_median']:.2f}\t{n['us_median']:.2f}\t{q:.4f}")
for v, l in rat.items():
    print(f"{v}: old/new median {st.median(l):.3f} (min {min(l):.3f}, max {max(l):.3f}) over {len(l)} rows")
if "--write" in sys.argv:
    with open(table, "w") as f:
        f.write(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    with open(ratios, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {table} ({len(rows)} rows, commit {sha}) and {ratios}")
