#!/usr/bin/env python3
"""Merges a run of the own FP8 dense GEMM sweep (bench_attn --proj-kinds fp8_block_scale, issue 13)
into the costmodel's dense projection tables (costmodels/data/h200/dense_proj_*.json).

Per table, rows of variants other than */fp8_block_scale* are kept as they are; the FP8 block-scaled rows
are replaced by the run's:
  <gemm>/fp8_block_scale      cuBLASLt block-scaled (same instrument as before; field instrument "cublaslt")
  <gemm>/fp8_block_scale_own  the own split-K wgmma kernel (proj_fp8.cu; tuned config in bt/split/cluster_reduction,
                              and since the eighteenth session rows (128 / 64 weight rows per CTA), pdl and pipe)
Rows of other own variants (e.g. *_own_old, the same-run comparison of PROJ_OWN_SET=both) stay out.
The gemm_fp8 fit takes the faster of the two per shape (costmodels/calibration/samples.cpp), as the
grouped FP8 family does with moe_grouped_gemm_fp8's variants. Every new row carries the run's commit.
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
    keep = [r for r in old["rows"] if not r["variant"].partition("/")[2].startswith("fp8_block_scale")]
    n_prev = len(old["rows"]) - len(keep)
    lt, own = {}, {}
    for r in new["rows"]:
        g, _, kind = r["variant"].partition("/")
        r = dict(r, commit=commit)
        r.pop("tuned_over", None)  # the tuning candidates stay in the run's own table (kernels/attention/results)
        if kind == "fp8_block_scale":
            r["instrument"] = "cublaslt"
            lt[(g, key(r))] = r
        elif kind == "fp8_block_scale_own":
            r["instrument"] = "own_wgmma"
            own[(g, key(r))] = r
    n_own = sum(1 for k, r in own.items() if k not in lt or r["us_median"] < lt[k]["us_median"])
    rows = keep + list(lt.values()) + list(own.values())
    old["rows"] = rows
    old["description"] = (old["description"].split(" || ")[0] + " || */fp8_block_scale_own = the own split-K FP8 wgmma "
                          "kernel (kernels/attention/proj_fp8.cu, M <= 1024) beside cuBLASLt's */fp8_block_scale; the "
                          "gemm_fp8 fit takes the faster per shape")
    note = (f'{len(lt)} cuBLASLt */fp8_block_scale and {len(own)} own */fp8_block_scale_own rows (own faster at {n_own} '
            f'shapes) with row-level "commit" {commit} come from the issue-13 run (kernels/attention/run_pj.sh, '
            f'NOTES.md "Dense projections: own FP8 GEMM" and its eighteenth-session sections: 64-row tiles + PDL, consumer pipelines = field pipe); they replace {n_prev} earlier cuBLASLt rows')
    old["merged_rows_note"] = (old.get("merged_rows_note", "").split(" || ")[0] + " || " + note).lstrip(" |")
    with open(path, "w") as f:
        json.dump(old, f, indent=1, sort_keys=True)
    print(name, "rows", len(rows), "cublaslt", len(lt), "own", len(own), "own faster", n_own, "replaced", n_prev)
