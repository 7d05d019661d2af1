#!/usr/bin/env python3
"""Build the costmodel table moe_grouped_gemm_fp8.json from the staged tables of a run_fp8.sh call
(issue 13): the own kernel's faster-of rows (variants own_masked / own_contiguous; each row's
kernel_variant says which kernel ran: 0 = weights-as-M variant 0, 5 = tokens-as-M 128x256 = library
variant 3) plus the per-expert cuBLASLt rows (cublaslt_block128) re-measured in the same run, on one
grid. The *_alt rows (the slower own form at each point) stay in kernels/moe/results only.
Extra grids measured in later calls at other expert counts (EXTRA below: fp8_g2g4/ = 2 and 4 active
experts, binaries b5d3610, same sweep code and form; fp8_dsv3/ = DeepSeek-V3's expert shapes 4096x7168 and
7168x2048 at every expert count of the grid, bench_moe --models DSV3) add their rows; each row keeps the
commit of the table it came from.
Usage: merge_fp8_tables.py OUT_JSON [RESULTS_DIR]   (RESULTS_DIR defaults to kernels/moe/results)
Exit status 2 with a message naming the file when an input is missing or malformed.
"""
import json, os, sys

if len(sys.argv) < 2:
    sys.stderr.write(__doc__)
    sys.exit(2)
out = sys.argv[1]
res = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), 'results')


def load(name):
    p = os.path.join(res, name)
    try:
        with open(p) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        sys.stderr.write(f"merge_fp8_tables: {p}: {e}\n")
        sys.exit(2)
    if d.get('schema') != 'servesim.kernel-table/1' or d.get('op') != 'moe_grouped_gemm_fp8' or 'rows' not in d:
        sys.stderr.write(f"merge_fp8_tables: {p}: field schema/op/rows: not a moe_grouped_gemm_fp8 kernel table\n")
        sys.exit(2)
    return d


own = load('moe_grouped_gemm_fp8.json')
lt = load('moe_grouped_gemm_fp8_cublaslt.json')
rows = []
for d, keep in ((own, ('own_masked', 'own_contiguous')), (lt, ('cublaslt_block128',))):
    for r in d['rows']:
        if r['variant'] in keep:
            r = dict(r)
            r['commit'] = d['commit']
            rows.append(r)
# (subfolder of RESULTS_DIR, active-expert counts taken from it); skipped when the folder is absent
# (None: every expert count of that folder)
EXTRA = [('fp8_g2g4', {2, 4}), ('fp8_dsv3', None)]
for sub, experts in EXTRA:
    if not os.path.isdir(os.path.join(res, sub)):
        continue
    xo, xl = load(os.path.join(sub, 'moe_grouped_gemm_fp8.json')), load(os.path.join(sub, 'moe_grouped_gemm_fp8_cublaslt.json'))
    for d, keep in ((xo, ('own_masked', 'own_contiguous')), (xl, ('cublaslt_block128',))):
        for r in d['rows']:
            if r['variant'] in keep and (experts is None or r['shape']['active_experts'] in experts):
                r = dict(r)
                r['commit'] = d['commit']
                rows.append(r)
merged = {k: v for k, v in own.items() if k != 'rows'}
merged['description'] = (
    'Routed-expert FP8 grouped GEMM (e4m3, 1x128 activation / 128x128 weight block scales, BF16 out), three '
    'instruments on one grid: own_masked / own_contiguous = one launch of the own kernel, the faster of '
    'kernels/moe/gemm_fp8.cu variant 0 (weights as wgmma M, kernel_variant 0) and gemm_fp8_tm.cu variant 3 '
    '(tokens as wgmma M, 128x256 tiles, kernel_variant 5) at each point; cublaslt_block128 = one cuBLASLt matmul '
    'per expert, re-measured in the same run. The fit takes the fastest of them at each shape. Source tables: '
    'kernels/moe/results/moe_grouped_gemm_fp8.json and moe_grouped_gemm_fp8_cublaslt.json (NOTES.md section 9; 8 and 32 '
    'active experts, commit e4119ca), fp8_g2g4/ (2 and 4 active experts, same code path and form, commit b5d3610, NOTES.md '
    'section 10), fp8_dsv3/ (DeepSeek-V3 expert shapes, NOTES.md section 11); each row carries its commit. '
    '| own: ' + own['description'])
merged['rows'] = rows
with open(out, 'w') as f:
    json.dump(merged, f, indent=1)
    f.write('\n')
print(f"merge_fp8_tables: {len(rows)} rows ({own['commit']}) -> {out}")
