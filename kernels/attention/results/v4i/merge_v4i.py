#!/usr/bin/env python3
"""Issue 12, seventeenth session (helper v4i; a copy of results/v4f/merge_v4f.py): merges sweeps of the V4 attention
kernel's staged producer on 592-B rows (ST + V16, V4WS_ST=1; binaries COMMIT) into the six V4 attention tables,
for use only once V4WS_ST=1 is made the default (kV4wsStDefault in dsv4.cu) -- NOT run in the seventeenth
session (v4i call 1: 1.005x at CSA prefill 4096 after 64K, under the 1% gate; no sweeps were run).
ST + V16 would run at every launch of the warp-specialised F16 kernel (split or not; the staged epilogue keeps
its own rule), so a swept row replaces the row of the same (variant, shape); swept points with no row here are
not added; rows with heads < 64 are untouched. The merged_rows_note keeps its earlier text (incl.
"results/v4f/call1/tables.tar.gz") and gains a sentence naming RUN_NOTE (the call's folder).
Usage: merge_v4i.py SWEEP_DIR COSTMODEL_DIR COMMIT RUN_NOTE [tables...]"""
import json, os, sys


def key(r):
    return (r["variant"], json.dumps(r["shape"], sort_keys=True))


run_dir, cm_dir, COMMIT, RUN_NOTE = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
only = sys.argv[5:] or ["csa_sparse_attn_decode", "hca_attn_decode", "csa_sparse_attn_prefill", "hca_attn_prefill",
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
    note = (f"{rep} rows with row-level commit {COMMIT} (issue 12, seventeenth session, helper v4i) are the "
            f"warp-specialised kernel's staged producer on 592-B pool rows (V4WS_ST with V16: rows 0..7 of each "
            f"producer warp's next tile gathered by 16-B copies into a staging ring while it waits for its buffer); "
            f"they replaced the rows at the same shapes ({span}); {added} swept points with no row here were not "
            f"added ({RUN_NOTE} has every swept row)")
    old["merged_rows_note"] = (old.get("merged_rows_note", "") + "; " + note).lstrip("; ")
    with open(path, "w") as f:
        json.dump(old, f, indent=1)
    print(name, "rows", len(old["rows"]), "replaced", rep, "not added (no row here)", added, span)
