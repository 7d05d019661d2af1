#!/usr/bin/env python3
"""Summarise kernel 24's per-CTA timelines (bench_moe --probe-shapes ... --probe-variants 24; NOTES.md §23, w4k).
Per file (one decode point) and launch: CTAs per SM, the SM clock (clock64 / globaltimer over each CTA), the prologue
(entry -> first bulk-copy issue -> first full barrier), the time per stage of the main loop split by the CTAs resident on
the SM, the epilogue, the dispatch ramp (entry times) and the tail (exit times). Launch 0 is skipped when there are more."""
import csv, statistics as st, sys, collections, os

def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(round(p * (len(v) - 1)))))]

for fn in sys.argv[1:]:
    rows = list(csv.DictReader(open(fn)))
    launches = sorted({int(r["launch"]) for r in rows})
    use = launches[1:] if len(launches) > 1 else launches
    name = os.path.basename(fn)[6:-4]
    agg = collections.defaultdict(list)
    for L in use:
        R = [r for r in rows if int(r["launch"]) == L and int(r["stages"]) > 0]
        if not R:
            continue
        f = lambda r, k: int(r[k])
        persm = collections.Counter(f(r, "smid") for r in R)
        ghz = st.median((f(r, "c_end") - f(r, "c_start")) / max(1, f(r, "g_end_ns") - f(r, "g_start_ns")) for r in R)
        g0 = min(f(r, "g_start_ns") for r in R)
        ends = [f(r, "g_end_ns") - g0 for r in R]
        starts = [f(r, "g_start_ns") - g0 for r in R]
        span = max(ends)
        hist = collections.Counter(persm.values())
        S = f(R[0], "stages")
        agg["span_us"].append(span / 1e3)
        agg["ghz"].append(ghz)
        agg["issue_ns"].append(st.median((f(r, "c_first_issue") - f(r, "c_start")) / ghz for r in R))
        agg["first_full_ns"].append(st.median((f(r, "c_first_full") - f(r, "c_start")) / ghz for r in R))
        agg["epi_ns"].append(st.median((f(r, "c_end") - f(r, "c_loop_end")) / ghz for r in R))
        agg["start_max_ns"].append(max(starts))
        agg["end_min_us"].append(min(ends) / 1e3)
        agg["end_med_us"].append(st.median(ends) / 1e3)
        per_k = collections.defaultdict(list)
        for r in R:
            k = persm[f(r, "smid")]
            per_k[k].append((f(r, "c_loop_end") - f(r, "c_first_full")) / max(1, S - 1))
        for k, v in per_k.items():
            agg["stage_clk_%d" % k].append(st.median(v))
        # per-SM busy time (first entry to last exit) vs the span: the idle share of SM-time
        sm_first = collections.defaultdict(lambda: 1 << 62)
        sm_last = collections.defaultdict(int)
        for r in R:
            s = f(r, "smid")
            sm_first[s] = min(sm_first[s], f(r, "g_start_ns") - g0)
            sm_last[s] = max(sm_last[s], f(r, "g_end_ns") - g0)
        busy = [sm_last[s] - sm_first[s] for s in sm_first]
        agg["sm_busy_mean_us"].append(st.mean(busy) / 1e3)
        agg["sms"].append(len(persm))
        agg["hist"].append(" ".join("%dx%d" % (n, c) for n, c in sorted(hist.items())))
        agg["ctas"].append(len(R))
        agg["stages"].append(S)
    if not agg:
        print(name, "no rows")
        continue
    m = lambda k: st.median(agg[k])
    sc = " ".join("%d/SM %.0f" % (int(k[10:]), m(k)) for k in sorted(agg) if k.startswith("stage_clk_"))
    print("%s: %d CTAs on %d SMs (CTAs per SM: %s), %d stages, %.2f GHz; span %.2f us, SM busy mean %.2f us; entry ramp %.0f ns; "
          "first issue %.0f ns, first full %.0f ns after entry; clocks per stage by CTAs on the SM: %s; epilogue %.0f ns; exits min / "
          "median / max %.2f / %.2f / %.2f us (launches %d)" % (
              name, agg["ctas"][0], agg["sms"][0], agg["hist"][0], agg["stages"][0], m("ghz"), m("span_us"), m("sm_busy_mean_us"),
              m("start_max_ns"), m("issue_ns"), m("first_full_ns"), sc, m("epi_ns"), m("end_min_us"), m("end_med_us"), m("span_us"),
              len(agg["span_us"])))
