#!/usr/bin/env python3
"""Issue 12, nineteenth session (helper v4p): merges a csa_sparse_attn_prefill sweep measured under v4_attn_plan's
rule 1 (binaries COMMIT) into the committed table. Only the rows whose plan the rule changed are replaced: the
prefill points (heads >= 64, the warp-specialised kernel's plan) where rule 0 (mla_decode_plan's wave cost) splits a
query and rule 1 does not (at 132 SMs: 64 heads chunks 2048 / 3072, 128 heads 1536 - 8192, prefix 0). Every other
row's plan, and so its kernel launch, is unchanged: those rows stay, and the script prints the swept / committed
ratio there (run-to-run drift) for the record. The two rules are mirrored from kernels/attention/mqa.cu
(mla_decode_plan_tiles); host test V4Attn.PlanRuleUnsplitsTheRamp states the same 8 points.
Usage: merge_v4p.py SWEEP_DIR COSTMODEL_DIR COMMIT RUN_NOTE"""
import heapq, json, os, statistics, sys


def prefill_rows(N, P, ratio, topk, window):
    """bench_attn_v4.cuh v4_prefill_problem: rows per query of a chunk of N after prefix P."""
    out = []
    for i in range(N):
        pos = P + i
        avail = (pos + 1) // ratio if ratio else 0
        nc = min(topk, avail) if ratio == 4 else avail
        out.append(nc + min(window, pos + 1))
    return out


def items(tiles, per):
    out = []
    for t in tiles:
        ns = max(1, (t + per - 1) // per)
        if ns == 1:
            out.append(t)
            continue
        ln = (t + ns - 1) // ns
        b = 0
        while b < t:
            out.append(min(t, b + ln) - b)
            b += ln
    return out


def makespan(tiles, per, W):
    slots = [0] * W
    end = 0
    for c in sorted((x + 2 for x in items(tiles, per)), reverse=True):
        t = heapq.heappop(slots) + c
        heapq.heappush(slots, t)
        end = max(end, t)
    return end


def plan_tiles(rows, heads, rule, sms=132):
    W = max(1, sms // max(1, (heads + 63) // 64))
    tiles = [(max(r, 0) + 63) // 64 for r in rows]
    tmax = max([1] + tiles)
    best_per, best = tmax, 1e300
    for s in range(1, min(tmax, 1024) + 1):
        per = max(4, (tmax + s - 1) // s)
        n = sum(max(1, (t + per - 1) // per) for t in tiles)
        cost = ((n + W - 1) // W) * (per + 2)
        if cost < best - 1e-9:
            best, best_per = cost, per
        if per == 4:
            break
    if rule == 1 and best_per < tmax and makespan(tiles, tmax, W) <= makespan(tiles, best_per, W):
        best_per = tmax
    return best_per, tmax


def changed(shape):
    rows = prefill_rows(int(shape["chunk"]), int(shape["prefix"]), int(shape["ratio"]), int(shape["topk"]),
                        int(shape["window"]))
    assert abs(sum(rows) / len(rows) - shape["rows_mean"]) < 1e-6, shape
    p0, tmax = plan_tiles(rows, shape["heads"], 0)
    p1, _ = plan_tiles(rows, shape["heads"], 1)
    return p0 != p1


def key(r):
    return (r["variant"], json.dumps(r["shape"], sort_keys=True))


run_dir, cm_dir, COMMIT, RUN_NOTE = sys.argv[1:5]
name = "csa_sparse_attn_prefill"
full = os.popen(f"git rev-parse {COMMIT}").read().strip() or COMMIT
path = os.path.join(cm_dir, name + ".json")
old = json.load(open(path))
new = json.load(open(os.path.join(run_dir, name + ".json")))
idx = {key(r): i for i, r in enumerate(old["rows"])}
rep, rat, drift, notrow = [], [], [], 0
for r in new["rows"]:
    assert r["shape"]["heads"] >= 64, r["shape"]
    k = key(r)
    if k not in idx:
        notrow += 1
        continue
    o = old["rows"][idx[k]]
    if not changed(r["shape"]):
        drift.append(o["us_median"] / r["us_median"])
        continue
    r = dict(r, commit=full)
    r["dtypes"] = dict(r.get("dtypes", {}), compute="fp16 (E4M3 -> FP16, Q/P FP16)")  # as the earlier merges
    rat.append(o["us_median"] / r["us_median"])
    rep.append((r["shape"]["heads"], r["shape"]["chunk"], r["shape"]["prefix"], o["us_median"], r["us_median"],
                o["tflops"], r["tflops"]))
    old["rows"][idx[k]] = r
rat.sort()
drift.sort()
span = f"old / new {rat[0]:.3f}-{rat[-1]:.3f}x, median {statistics.median(rat):.3f}x" if rat else "none"
dspan = (f"{drift[0]:.3f}-{drift[-1]:.3f}, median {statistics.median(drift):.3f}" if drift else "none")
note = (f"{len(rep)} rows with row-level commit {COMMIT} (issue 12, nineteenth session, helper v4p) are the prefill "
        f"chunks at prefix 0 whose plan the V4 attention plan's new rule (v4_attn_plan rule 1: no split where the "
        f"unsplit items' list schedule is no longer) no longer splits (no FP32 partials, no combine kernel, the staged "
        f"epilogue runs); they replaced the rows at the same shapes ({span}); the other rows' plans are unchanged and "
        f"they stay (the same sweep measured them at committed / swept {dspan}); {RUN_NOTE} has every swept row")
old["merged_rows_note"] = (old.get("merged_rows_note", "") + "; " + note).lstrip("; ")
with open(path, "w") as f:
    json.dump(old, f, indent=1)
print(name, "rows", len(old["rows"]), "replaced", len(rep), span, "| unchanged-plan rows committed/swept", dspan,
      len(drift), "| swept points with no row here", notrow)
for x in sorted(rep):
    print("  H %d chunk %d prefix %d: %.1f -> %.1f us (%.0f -> %.0f TF/s)" % x)
