# tk4 (twenty-third session; a copy of results/tkm2/merge_topk.py, the same-kernel line only when there are such rows). tkm2 (twenty-first session): python3 merge_topk.py <committed csa_topk.json> <sweep csa_topk.json> <out> "<note>"
# merge a csa_topk sweep (new) into the committed table (old): new rows replace old ones of the same (variant, shape),
# old rows the sweep did not measure are kept; prints old/new statistics
import json, sys, statistics as st
oldp, newp, outp, note = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
old = json.load(open(oldp)); new = json.load(open(newp))
key = lambda r: r["variant"] + "|" + json.dumps(r["shape"], sort_keys=True)
o = {key(r): r for r in old["rows"]}; n = {key(r): r for r in new["rows"]}
rows = [n.get(k, r) for k, r in o.items()] + [r for k, r in n.items() if k not in o]
kept = sum(1 for k in o if k not in n)
both = [k for k in o if k in n]
rat = [o[k]["us_median"] / n[k]["us_median"] for k in both]
ch = [k for k in both if o[k].get("kernel") != n[k].get("kernel")]
print(f"old {len(o)} rows, new {len(n)}, re-measured {len(both)}, kept {kept}, added {len(n) - len(both)}")
print(f"all re-measured: median old/new {st.median(rat):.3f} (min {min(rat):.3f}, max {max(rat):.3f})")
same = [o[k]["us_median"] / n[k]["us_median"] for k in both if k not in ch]
if same: print(f"same kernel ({len(same)}): median old/new {st.median(same):.3f}, p10 {sorted(same)[len(same)//10]:.3f}, p90 {sorted(same)[9*len(same)//10]:.3f}")
for k in ch:
    print(f"  changed {k}: {o[k].get('kernel')} {o[k]['us_median']:.2f} -> {n[k].get('kernel')} {n[k]['us_median']:.2f} us  old/new {o[k]['us_median']/n[k]['us_median']:.3f}")
if ch: print(f"changed kernel ({len(ch)}): median old/new {st.median([o[k]['us_median']/n[k]['us_median'] for k in ch]):.3f}")
def xfloor(tab):
    v = [r["us_median"] / (r["bytes"] / 4.26e12 * 1e6) for r in tab.values()
         if r["variant"] == "decode" and r["shape"]["batch"] >= 32 and r["shape"]["ctx"] >= 8192]
    return st.median(v), sum(1 for x in v if x <= 1.5), len(v)
print("decode B>=32 ctx>=8K x-floor: old median %.2f (%d of %d within 1.5x)" % xfloor(o))
m = {key(r): r for r in rows}
print("decode B>=32 ctx>=8K x-floor: merged median %.2f (%d of %d within 1.5x)" % xfloor(m))
out = dict(old)
for k2, v2 in new.items():
    if k2 not in ("rows", "note"): out[k2] = v2
out["rows"] = rows; out["note"] = note
open(outp, "w").write(json.dumps(out, indent=1))
