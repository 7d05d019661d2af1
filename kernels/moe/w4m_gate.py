#!/usr/bin/env python3
"""Gate of NOTES.md §25 (w4m): per-call time of variant NEW (PDL form) vs BASE (no PDL) from `bench_moe --only w4pdl`.
Per (model, G, m, matrix in w13 / w2 repeated) and timing (stream / graph): min over repetitions; ratio t_new / t_base.
Gate: the median of the stream ratios over the decode points (m 1-16, K3 / DSV4-Flash, w13 / w2, G 8 / 32) < 1 and no
point's speed-up below 0.97x (ratio <= 1 / 0.97). Also prints graph and chain medians, per-shape medians and a table.
Usage: w4m_gate.py bench_pdl.txt NEW BASE [--table]"""
import re, sys, statistics as st
path, new, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pat = re.compile(r"w4pdl rep=(\d+) (\S+) G=(\d+) m=(\d+) bt=(\d+) v=(\d+) k13=(\d+) k2=(\d+): w13 stream ([\d.]+) us \(([\d.]+) TB/s\) "
                 r"graph ([\d.]+) \(([\d.]+)\) \| w2 stream ([\d.]+) \(([\d.]+)\) graph ([\d.]+) \(([\d.]+)\) \| chain stream ([\d.]+) graph ([\d.]+)")
d = {}
for line in open(path):
    mm = pat.search(line)
    if not mm: continue
    rep, model, G, m, bt, v = int(mm[1]), mm[2], int(mm[3]), int(mm[4]), int(mm[5]), int(mm[6])
    vals = dict(w13_s=float(mm[9]), w13_g=float(mm[11]), w2_s=float(mm[13]), w2_g=float(mm[15]), ch_s=float(mm[17]), ch_g=float(mm[18]),
                k13=int(mm[7]), k2=int(mm[8]), tb13=float(mm[10]) * float(mm[9]), tb2=float(mm[14]) * float(mm[13]))
    d.setdefault((model, G, m, v), []).append(vals)
def best(k, key): return min(x[key] for x in d[k])
rat = {t: [] for t in ("w13_s", "w13_g", "w2_s", "w2_g", "ch_s", "ch_g")}
per_shape = {}
rows = []
for (model, G, m, v) in sorted(d):
    if v != new or (model, G, m, base) not in d: continue
    kn, kb = (model, G, m, new), (model, G, m, base)
    for t in rat:
        r = best(kn, t) / best(kb, t)
        rat[t].append(r)
        if t in ("w13_s", "w2_s"): per_shape.setdefault((model, t[:3].rstrip("_"), G), []).append(r)
    rows.append((model, G, m, kn, kb))
if not rat["w2_s"]:
    print("0 no points"); sys.exit(0)
rep_s = rat["w13_s"] + rat["w2_s"]
rep_g = rat["w13_g"] + rat["w2_g"]
ok = st.median(rep_s) < 1 and max(rep_s) <= 1 / 0.97
print(f"{int(ok)} points {len(rep_s)}: repeated stream median {st.median(rep_s):.3f} (best {min(rep_s):.3f}, worst {max(rep_s):.3f}); "
      f"graph median {st.median(rep_g):.3f} (best {min(rep_g):.3f}, worst {max(rep_g):.3f}); chain stream {st.median(rat['ch_s']):.3f} "
      f"graph {st.median(rat['ch_g']):.3f} (best {min(rat['ch_g']):.3f}, worst {max(rat['ch_g']):.3f})")
for k in sorted(per_shape): print(f"  {k[0]} {k[1]} G={k[2]}: stream median {st.median(per_shape[k]):.3f} (min {min(per_shape[k]):.3f} max {max(per_shape[k]):.3f})")
if "--table" in sys.argv:
    print("| model G m | v%d w13 stream / graph us (TB/s) | v%d w13 | v%d w2 stream / graph | v%d w2 | chain v%d / v%d stream, graph |" % (base, new, base, new, base, new))
    for model, G, m, kn, kb in rows:
        f = lambda k, t, tb: f"{best(k, t):.2f} ({d[k][0][tb] / best(k, t):.2f})"
        print(f"| {model} G{G} m{m} | {f(kb,'w13_s','tb13')} / {f(kb,'w13_g','tb13')} | {f(kn,'w13_s','tb13')} / {f(kn,'w13_g','tb13')} | "
              f"{f(kb,'w2_s','tb2')} / {f(kb,'w2_g','tb2')} | {f(kn,'w2_s','tb2')} / {f(kn,'w2_g','tb2')} | "
              f"{best(kb,'ch_s'):.2f} / {best(kn,'ch_s'):.2f}, {best(kb,'ch_g'):.2f} / {best(kn,'ch_g'):.2f} |")
