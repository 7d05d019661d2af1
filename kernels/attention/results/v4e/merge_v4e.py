#!/usr/bin/env python3
"""Issue 12, fifteenth session (lead, after helper v4e): merges the sweeps of the V4 attention kernel with
the staged epilogue (V4WS_EP=1: O staged through shared memory, then coalesced 16-B row stores;
binaries 96d5d11, the lead's device call of the fifteenth session) into the six V4 attention tables.
The default runs that form on launches whose plan splits no query, so a swept row replaces the row of
the same (variant, shape) here only where the plan does not split (row-level commit 96d5d11); split
points keep their earlier rows (the kernel the default runs there); swept points with no row here are
not added; rows with heads < 64 (other kernels) are untouched.
Usage: merge_v4e.py SWEEP_DIR COSTMODEL_DIR (on the tables of 4f528c3, i.e. before 7baa1ab)"""
import json, math, os, sys


def plan_splits(rows_list, heads, sms=132):
    """True when mla_decode_plan (kernels/attention/mqa.cu, the plan bench_attn uses for the V4 kernel)
    splits any query of `rows_list` (rows per query) over several work items (FP32 partials + combine):
    the same search over tiles per item, cost = waves x (per + 2), one CTA per SM per 64-head group,
    then plan_from_split's ns = ceil(rows / (per * 64)) per query."""
    groups = max(1, (heads + 63) // 64)
    W = max(1, sms // groups)
    tiles = [(max(r, 0) + 63) // 64 for r in rows_list]
    tmax = max([1] + tiles)
    best_per, best = tmax, 1e300
    for s in range(1, min(tmax, 1024) + 1):
        per = max(4, (tmax + s - 1) // s)
        items = sum(max(1, (t + per - 1) // per) for t in tiles)
        cost = ((items + W - 1) // W) * (per + 2)
        if cost < best - 1e-9:
            best, best_per = cost, per
        if per == 4:
            break
    return any(max(1, (max(r, 0) + best_per * 64 - 1) // (best_per * 64)) > 1 for r in rows_list)


def prefill_rows(N, P, ratio, topk, window):
    """Rows per query of a prefill chunk of N after prefix P: bench_attn_v4.cuh v4_prefill_problem
    (top-k of the compressed rows available at the query's position for CSA, all of them for HCA,
    plus the window), so the causal ramp at small prefixes is exact, not its mean."""
    out = []
    for i in range(N):
        pos = P + i
        avail = (pos + 1) // ratio if ratio else 0
        nc = min(topk, avail) if ratio == 4 else avail
        out.append(nc + min(window, pos + 1))
    return out


def splits(shape):
    if "chunk" in shape:  # prefill tables
        rows = prefill_rows(int(shape["chunk"]), int(shape["prefix"]), int(shape["ratio"]), int(shape["topk"]),
                            int(shape["window"]))
        assert abs(sum(rows) / len(rows) - shape["rows_mean"]) < 1e-6, shape
        return plan_splits(rows, shape["heads"])
    return plan_splits([int(math.ceil(shape["rows_per_query"]))] * int(shape["batch"]), shape["heads"])


COMMIT = "96d5d11"


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
    rep, added, rat, was16, kept = 0, 0, [], 0, 0
    for r in new["rows"]:
        assert r["shape"]["heads"] >= 64, r["shape"]
        if splits(r["shape"]):  # the default runs the staged epilogue on unsplit launches only
            kept += 1
            continue
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
    note = (f"{rep} rows with row-level commit {COMMIT} (issue 12, fifteenth session, the lead's device call after "
            f"helper v4e) are the warp-specialised kernel with the staged epilogue, the new default (O written to "
            f"shared memory, then coalesced 16-B row stores instead of 32-bit stores); they replaced the rows at the "
            f"same shapes ({span}); {kept} swept points whose plan splits a query (FP32 partials: there the "
            f"staged form measured 0.93-1.06x, median 0.96-0.98x, so the default keeps the 32-bit stores) kept "
            f"their earlier rows; {added} points of that sweep with no row here were not added "
            f"(kernels/attention/results/v4e/lead_call/tables.tar.gz has every swept row)")
    old["merged_rows_note"] = (old.get("merged_rows_note", "") + "; " + note).lstrip("; ")
    with open(path, "w") as f:
        json.dump(old, f, indent=1)
    print(name, "rows", len(old["rows"]), "replaced", rep, "kept (split plans)", kept, f"(were BF16: {rep - was16})", "not added (no row here)", added, span)
