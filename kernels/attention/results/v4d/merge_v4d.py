#!/usr/bin/env python3
"""Issue 12, fourteenth session (helper v4d): merges the sweeps of the new default of the V4 attention
kernel (F16 on every list, early-Q start, lean consumer; bench_attn with no V4WS_* setting, binaries
a94f0e9, device call 2 of the v4d ledger rows) into the six V4 attention tables. The default changed
for every row that v4_attn_ws runs (heads >= 64; the sweeps ran those only), so every swept row whose
(variant, shape) has a row here replaces it, with row-level commit a94f0e9; points with no row here
are not added (as the earlier merges). Rows with heads < 64 (other kernels) are untouched.
Usage: merge_v4d.py SWEEP_DIR COSTMODEL_DIR"""
import json, os, sys

COMMIT = "a94f0e9"


def key(r):
    return (r["variant"], json.dumps(r["shape"], sort_keys=True))


run_dir, cm_dir = sys.argv[1], sys.argv[2]
only = sys.argv[3:] or ["csa_sparse_attn_decode", "hca_attn_decode", "csa_sparse_attn_prefill", "hca_attn_prefill",
                        "swa_attn_decode", "swa_attn_prefill"]
full = os.popen(f"git rev-parse {COMMIT}").read().strip() or COMMIT
for name in only:
    path = os.path.join(cm_dir, name + ".json")
    old = json.load(open(path))
    new = json.load(open(os.path.join(run_dir, name + ".json")))
    idx = {key(r): i for i, r in enumerate(old["rows"])}
    rep, added, rat, was16 = 0, 0, [], 0
    for r in new["rows"]:
        assert r["shape"]["heads"] >= 64, r["shape"]
        r = dict(r, commit=full)
        r["dtypes"] = dict(r.get("dtypes", {}), compute="fp16 (E4M3 -> FP16, Q/P FP16)")
        k = key(r)
        if k in idx:
            o = old["rows"][idx[k]]
            was16 += "fp16" in o.get("dtypes", {}).get("compute", "")
            rat.append(o["us_median"] / r["us_median"])
            old["rows"][idx[k]] = r
            rep += 1
        else:
            added += 1
    rat.sort()
    span = f"old / new {rat[0]:.2f}-{rat[-1]:.2f}x, median {rat[len(rat) // 2]:.3f}x" if rat else "none"
    note = (f"{rep} rows with row-level commit {COMMIT} (issue 12, fourteenth session, helper v4d, call 2) are the "
            f"warp-specialised kernel's new default: F16 form on every list (before: only where idx_ld > 256; "
            f"{rep - was16} of these rows were BF16 rows), Q copied by the consumers while the producer gathers tile 0, "
            f"lean consumer (descriptors built once, 64-bit row mask, O rescaled only when a row max changed); they "
            f"replaced the rows at the same shapes ({span}); {added} points of that sweep with no row here were not "
            f"added (kernels/attention/results/v4d/call2_tables.tar.gz has every swept row)")
    old["merged_rows_note"] = (old.get("merged_rows_note", "") + "; " + note).lstrip("; ")
    with open(path, "w") as f:
        json.dump(old, f, indent=1)
    print(name, "rows", len(old["rows"]), "replaced", rep, f"(were BF16: {rep - was16})", "not added (no row here)", added, span)
