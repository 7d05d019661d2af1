#!/usr/bin/env python3
"""Gate of run_w4k.sh CALL=2 (NOTES.md §23): t(NV)/t(REF) from w4cmp lines over the points where variant 25 runs
kernel 25 / 26 (the one-wave G 8 grids: K3 w2, DSV4-Flash w2, K3 w13 at m 1-16). Passes when the per-repetition
median of the event ratios is < 1 and every point's min-over-repetitions ratio is <= 1/0.97. Prints 1/0 first, then
the medians (event and graph), per shape, and the other shapes (same kernel: noise). Usage: w4k_gate.py CMP NV REF"""
import re, sys, statistics
NV, REF = sys.argv[2], sys.argv[3]
t = {}
for l in open(sys.argv[1]):
    m = re.match(r"w4cmp rep=(\d) (\S+ \S+ G=\d+) m=(\d+) bt=\d+ v=(\d+): event ([\d.]+) us \(\S+ TB/s\), graph ([\d.]+)", l)
    if m:
        t[(m.group(1), m.group(2), int(m.group(3)), m.group(4))] = (float(m.group(5)), float(m.group(6)))
def gate(shapes, lo, hi, k):
    pts = sorted({(b, c) for (a, b, c, v) in t if lo <= c <= hi and b in shapes})
    med = {}
    for rep in "01":
        r = [t[(rep, b, c, NV)][k] / t[(rep, b, c, REF)][k] for (b, c) in pts if (rep, b, c, NV) in t and (rep, b, c, REF) in t]
        med[rep] = statistics.median(r) if r and len(r) >= 5 * len(pts) // 6 else 9
    worst, wp, per, allr = 0, None, {}, []
    for b, c in pts:
        try:
            r = min(t[(a, b, c, NV)][k] for a in "01") / min(t[(a, b, c, REF)][k] for a in "01")
        except KeyError:
            r = 9
        per.setdefault(b, []).append(r)
        allr.append(r)
        if r > worst:
            worst, wp = r, (b, c)
    ok = med["0"] < 1 and med["1"] < 1 and worst <= 1 / 0.97 and len(pts) > 0
    return ok, "%s m %d-%d: median per rep %.3f %.3f (min-over-reps points: median %.3f, best %.3f, worst %.3f %s), n %d; per shape %s" % (
        "event" if k == 0 else "graph", lo, hi, med["0"], med["1"], statistics.median(allr) if allr else 9,
        min(allr) if allr else 9, worst, wp, len(pts), "; ".join("%s %.3f" % (b, statistics.median(v)) for b, v in per.items()))
G8 = {"K3 w2 G=8", "DSV4-Flash w2 G=8", "K3 w13 G=8"}
rest = {b for (a, b, c, v) in t} - G8
ok, s = gate(G8, 1, 16, 0)
_, sg = gate(G8, 1, 16, 1)
_, s8 = gate(G8, 1, 8, 0)
_, s16 = gate(G8, 9, 16, 0)
_, so = gate(rest, 1, 16, 0)
print(1 if ok else 0, "v%s/v%s at the kernel-25/26 points:" % (NV, REF), s, "|", sg, "| m 1-8:", s8, "| m 9-16:", s16,
      "| other shapes (same kernel):", so)
