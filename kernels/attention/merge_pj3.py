#!/usr/bin/env python3
"""Merges helper pj3's re-measure (run_pj3.sh: bench_attn PROJ_OWN_SET=rule --proj-m-only ...) into the dense
projection tables: only the own rows (<gemm>/fp8_block_scale_own) at the run's M values are replaced (the plan's
untuned form + PDL: one form per M range, so the rows stay smooth in M); cuBLASLt rows and every other row stay.
Prints own new/old per table. Usage: merge_pj3.py RUN_TABLE_DIR COSTMODEL_DIR [tables...]"""
import json, os, statistics, sys

run_dir, cm_dir = sys.argv[1], sys.argv[2]
names = sys.argv[3:] or ["dense_proj_v4pro", "dense_proj_v4flash", "dense_proj_k3_kda", "dense_proj_k3_mla"]
key = lambda r: (r["variant"], json.dumps(r["shape"], sort_keys=True))
for name in names:
    path = os.path.join(cm_dir, name + ".json")
    old = json.load(open(path))
    new = json.load(open(os.path.join(run_dir, name + ".json")))
    commit = new["commit"]
    fresh = {}
    for r in new["rows"]:
        if r["variant"].partition("/")[2] == "fp8_block_scale_own":
            r = dict(r, commit=commit, instrument="own_wgmma")
            r.pop("tuned_over", None)
            fresh[key(r)] = r
    lt = {key(r): r for r in old["rows"] if r["variant"].partition("/")[2] == "fp8_block_scale"}
    rat, rat_best, out, n = [], [], [], 0
    for r in old["rows"]:
        k = key(r)
        if k in fresh:
            f = fresh.pop(k)
            rat.append(f["us_median"] / r["us_median"])
            lk = (r["variant"].replace("_own", ""), k[1])
            if lk in lt:
                l = lt[lk]["us_median"]
                rat_best.append(min(f["us_median"], l) / min(r["us_median"], l))
            out.append(f)
            n += 1
        else:
            out.append(r)
    assert not fresh, "rows of the run without a row in the table: %s" % list(fresh)[:3]
    old["rows"] = out
    Ms = sorted({r["shape"]["M"] for r in new["rows"]})
    note = (f"{n} own */fp8_block_scale_own rows at M {Ms} with row-level commit {commit} come from helper pj3's run "
            f"(kernels/attention/run_pj3.sh, PROJ_OWN_SET=rule: the plan's untuned form + PDL, NOTES.md twentieth session); "
            f"the other rows are unchanged")
    old["merged_rows_note"] = (old.get("merged_rows_note", "") + " || " + note).lstrip(" |")
    with open(path, "w") as fh:
        json.dump(old, fh, indent=1, sort_keys=True)
    q = statistics.quantiles(rat, n=10) if len(rat) > 2 else [min(rat)] * 9
    print("%s: %d own rows replaced; own new/old median %.3f (p10 %.3f p90 %.3f, min %.3f max %.3f); faster-of-two new/old median %.3f"
          % (name, n, statistics.median(rat), q[0], q[-1], min(rat), max(rat), statistics.median(rat_best) if rat_best else float("nan")))
