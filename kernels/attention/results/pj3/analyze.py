#!/usr/bin/env python3
"""pj3's reference points (run_pj3.sh): per point cuBLASLt, own tuned over pj's forms (= the committed rows'
method), the plan's current default + PDL ('rule'), the token-split form (64-row weight tiles x bt 128) tuned
('ts') and forced (heuristic split, pipe 0 / 1, cluster), the plan default at pipe 1.
Usage: analyze.py POINTS_JSON [OUT_JSON]"""
import json, statistics, sys

rows = json.load(open(sys.argv[1]))["rows"]
by = {}
for r in rows:
    s = r["shape"]
    by.setdefault((s["M"], s["N"], s["K"]), {})[r["variant"].partition("/")[2]] = r
V = {"lt": "fp8_block_scale", "old": "fp8_block_scale_own", "rule": "fp8_block_scale_own_rule",
     "ts": "fp8_block_scale_own_ts", "ts0": "fp8_block_scale_own_bt128_s0_r64_pdl",
     "ts1": "fp8_block_scale_own_bt128_s0_r64_p1_pdl", "tscl": "fp8_block_scale_own_bt128_s0_cl_r64_p1_pdl",
     "rule1": "fp8_block_scale_own_bt0_s0_p1_pdl"}
out = []
print("%4s %6s %6s | %7s %7s %7s %7s %7s %7s %7s %7s | ts0/rule ts1/rule ts1/old tsbest-split" % ("M", "N", "K", *V))
for k in sorted(by):
    d = by[k]
    us = {n: (d[v]["us_median"] if v in d else None) for n, v in V.items()}
    row = {"M": k[0], "N": k[1], "K": k[2], "us": us,
           "forms": {n: {f: d[v].get(f) for f in ("bt", "split", "cluster_reduction", "rows", "pdl", "pipe")} for n, v in V.items() if v in d}}
    fl = 2.0 * k[0] * k[1] * k[2]
    row["tflops"] = {n: round(fl / u / 1e6, 1) for n, u in us.items() if u}
    out.append(row)
    f = lambda a, b: ("%.3f" % (us[a] / us[b])) if us[a] and us[b] else "  -  "
    tsf = row["forms"].get("ts", {})
    print("%4d %6d %6d | " % k + " ".join("%7.2f" % us[n] if us[n] else "    -  " for n in V) +
          " | %s %s %s  s%s/cl%s/p%s (heur s%s)" % (f("ts0", "rule"), f("ts1", "rule"), f("ts1", "old"), tsf.get("split"),
                                                    int(bool(tsf.get("cluster_reduction"))), tsf.get("pipe"), row["forms"].get("ts1", {}).get("split")))
mid = [r for r in out if 65 <= r["M"] <= 128]
for a, b in (("ts0", "rule"), ("ts1", "rule"), ("ts1", "old"), ("ts", "old"), ("ts1", "rule1"), ("rule1", "rule"), ("tscl", "ts1")):
    rat = [r["us"][a] / r["us"][b] for r in mid if r["us"][a] and r["us"][b]]
    if rat:
        q = statistics.quantiles(rat, n=10) if len(rat) > 2 else [min(rat)] * 9
        print("M 65-128 %s/%s: n %d median %.3f p10 %.3f p90 %.3f min %.3f max %.3f" % (a, b, len(rat), statistics.median(rat), q[0], q[-1], min(rat), max(rat)))
if len(sys.argv) > 2:
    json.dump({"rows": out}, open(sys.argv[2], "w"), indent=1)
