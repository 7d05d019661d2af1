#!/usr/bin/env python3
"""Merges a run of the own FP8 dense GEMM sweep (bench_attn --proj-kinds fp8_block_scale, issue 13)
into the costmodel's dense projection tables (costmodels/data/h200/dense_proj_*.json).

Per table, rows of variants other than */fp8_block_scale* are kept as they are. Then:
  <gemm>/fp8_block_scale_cublaslt  the run's cuBLASLt block-scaled rows (bench variant <gemm>/fp8_block_scale)
  <gemm>/fp8_block_scale_own       the run's own-kernel rows (proj_fp8.cu, tuned config in bt/split/cluster_reduction)
  <gemm>/fp8_block_scale           the faster of the two at each shape (field "instrument": cublaslt | own_wgmma,
                                   "other_us": the slower one's time) -- the row the gemm_fp8 fit reads
  <gemm>/fp8_block_scale_prev      the table's previous */fp8_block_scale rows (cuBLASLt, earlier run), for before/after
Every new row carries the run's commit as a row-level "commit".
Usage: merge_proj_fp8.py RUN_TABLE_DIR COSTMODEL_DIR [tables...]"""
import json, os, sys

run_dir, cm_dir = sys.argv[1], sys.argv[2]
names = sys.argv[3:] or ["dense_proj_v4pro", "dense_proj_v4flash", "dense_proj_k3_kda", "dense_proj_k3_mla"]


def key(r):
    return json.dumps(r["shape"], sort_keys=True)


for name in names:
    path = os.path.join(cm_dir, name + ".json")
    old = json.load(open(path))
    new = json.load(open(os.path.join(run_dir, name + ".json")))
    commit = new["commit"]
    keep, prev = [], []
    for r in old["rows"]:
        v = r["variant"]
        g, _, kind = v.partition("/")
        if kind == "fp8_block_scale":
            r = dict(r, variant=g + "/fp8_block_scale_prev")
            prev.append(r)
        elif kind.startswith("fp8_block_scale"):
            continue  # an earlier merge's rows: replaced
        else:
            keep.append(r)
    lt, own = {}, {}
    for r in new["rows"]:
        g, _, kind = r["variant"].partition("/")
        r = dict(r, commit=commit)
        r.pop("tuned_over", None)  # the tuning candidates stay in the run's own table (kernels/attention/results)
        if kind == "fp8_block_scale":
            r["variant"] = g + "/fp8_block_scale_cublaslt"
            r["instrument"] = "cublaslt"
            lt[(g, key(r))] = r
        elif kind == "fp8_block_scale_own":
            r["instrument"] = "own_wgmma"
            own[(g, key(r))] = r
    best = []
    n_own = 0
    for k in sorted(set(lt) | set(own)):
        a, b = lt.get(k), own.get(k)
        w, o = (a, b) if b is None or (a is not None and a["us_median"] <= b["us_median"]) else (b, a)
        r = dict(w, variant=k[0] + "/fp8_block_scale")
        r.pop("tuned_over", None)
        if o is not None:
            r["other_us"] = o["us_median"]
        n_own += r["instrument"] == "own_wgmma"
        best.append(r)
    rows = keep + best + list(lt.values()) + list(own.values()) + prev
    old["rows"] = rows
    old["description"] = (old["description"].split(" || ")[0] + " || */fp8_block_scale = the faster per shape of cuBLASLt "
                          "(*_cublaslt) and the own split-K FP8 wgmma kernel (kernels/attention/proj_fp8.cu, *_own, M <= 1024), "
                          "field instrument; *_prev = the earlier cuBLASLt rows")
    note = (f'{len(best)} */fp8_block_scale rows (faster of {len(lt)} cuBLASLt and {len(own)} own-kernel rows, own faster at '
            f'{n_own}) with row-level "commit" {commit} come from the issue-13 run (kernels/attention/run_proj_fp8.sh, '
            f'NOTES.md "Dense projections: own FP8 GEMM"); the previous cuBLASLt rows are *_prev')
    old["merged_rows_note"] = (old.get("merged_rows_note", "").split(" || ")[0] + " || " + note).lstrip(" |")
    with open(path, "w") as f:
        json.dump(old, f, indent=1, sort_keys=True)
    print(name, "rows", len(rows), "best", len(best), "own faster", n_own, "prev", len(prev))
