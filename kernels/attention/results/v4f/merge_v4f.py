#!/usr/bin/env python3
"""Issue 12, sixteenth session (helper v4f): merges the sweeps of the V4 attention kernel with 16-B producer
gathers from 592-B pool rows (V4WS_V16=1, the new default where measured faster; binaries COMMIT) into the six
V4 attention tables. The V16 form runs at every launch of the warp-specialised F16 kernel (split or not; the
staged epilogue keeps its own rule: unsplit launches only), so a swept row replaces the row of the same
(variant, shape) at every point; swept points with no row here are not added; rows with heads < 64 (other
kernels, 584-B rows) are untouched.
Usage: merge_v4f.py SWEEP_DIR COSTMODEL_DIR COMMIT [tables...]"""
import json, os, sys


def key(r):
    return (r["variant"], json.dumps(r["shape"], sort_keys=True))


run_dir, cm_dir, COMMIT = sys.argv[1], sys.argv[2], sys.argv[3]
only = sys.argv[4:] or ["csa_sparse_attn_decode", "hca_attn_decode", "csa_sparse_attn_prefill", "hca_attn_prefill",
                        "swa_attn_decode", "swa_attn_prefill"]
full = os.popen(f"git rev-parse {COMMIT}").read().strip() or COMMIT
for name in only:
    path = os.path.join(cm_dir, name + ".json")
    old = json.load(open(path))
    new = json.load(open(os.path.join(run_dir, name + ".json")))
    idx = {key(r): i for i, r in enumerate(old["rows"])}
    rep, added, rat = 0, 0, []
    for r in new["rows"]:
        assert r["shape"]["heads"] >= 64, r["shape"]
        r = dict(r, commit=full)
        r["dtypes"] = dict(r.get("dtypes", {}), compute="fp16 (E4M3 -> FP16, Q/P FP16)",
                           kv="fp8_e4m3+ue8m0 (584 B rows at a 592-B stride)")
        k = key(r)
        if k in idx:
            o = old["rows"][idx[k]]
            rat.append(o["us_median"] / r["us_median"])
            old["rows"][idx[k]] = r
            rep += 1
        else:
            added += 1
    rat.sort()
    span = f"old / new {rat[0]:.3f}-{rat[-1]:.3f}x, median {rat[len(rat) // 2]:.3f}x" if rat else "none"
    note = (f"{rep} rows with row-level commit {COMMIT} (issue 12, sixteenth session, helper v4f) are the "
            f"warp-specialised kernel with 16-B producer gathers from 592-B pool rows (V4WS_V16, the new default: "
            f"the 584-B row at a 16-B aligned stride, 2 copy instructions per lane and row instead of 3); they "
            f"replaced the rows at the same shapes ({span}); {added} swept points with no row here were not added "
            f"(kernels/attention/results/v4f/call1/tables.tar.gz has every swept row)")
    old["merged_rows_note"] = (old.get("merged_rows_note", "") + "; " + note).lstrip("; ")
    with open(path, "w") as f:
        json.dump(old, f, indent=1)
    print(name, "rows", len(old["rows"]), "replaced", rep, "not added (no row here)", added, span)
