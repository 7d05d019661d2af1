#!/usr/bin/env python3
"""Merge a run_w4.sh call's tables into costmodels/data/h200 (issue 13, W4A16 decode + dispatch).

moe_grouped_gemm_w4a16.json: every committed row whose (variant in {w4a16, w4a16_bt_alt}, model,
matrix, active_experts, tokens_per_expert, bt) is re-measured is replaced by the new row; the old row
is kept with variant "<variant>_prev" (not a fit input: samples.cpp takes variant "w4a16" only).
moe_permute.json / moe_combine.json: replaced by the new tables' rows (variant permute_3launch is
dropped from the costmodels table, since the permute family takes every skew-0 row; it stays in
kernels/moe/results).
Usage: merge_w4_dispatch.py NEW_TABLES_DIR COMMIT NOTE
"""
import json, sys, os

new_dir, commit, note = sys.argv[1], sys.argv[2], sys.argv[3]
data = os.path.join(os.path.dirname(__file__), '..', '..', 'costmodels', 'data', 'h200')

def key(r):
    s = r['shape']
    return (r['variant'], s['model'], s['matrix'], s['active_experts'], s['tokens_per_expert'], s.get('bt'))

def load(p):
    with open(p) as f:
        return json.load(f)

def dump(d, p):
    with open(p, 'w') as f:
        json.dump(d, f, indent=1)
        f.write('\n')

# W4A16
p = os.path.join(data, 'moe_grouped_gemm_w4a16.json')
old, new = load(p), load(os.path.join(new_dir, 'moe_grouped_gemm_w4a16.json'))
fresh = {}
for r in new['rows']:
    if r['variant'] in ('w4a16', 'w4a16_bt_alt'):
        r = dict(r, commit=commit, note=note)
        fresh[key(r)] = r
rows, replaced = [], 0
for r in old['rows']:
    k = key(r)
    if k in fresh:
        rows.append(dict(r, variant=r['variant'] + '_prev'))
        rows.append(fresh.pop(k))
        replaced += 1
    else:
        rows.append(r)
rows.extend(fresh.values())  # new keys (none expected)
old['rows'] = rows
old['merged_rows_note'] = old.get('merged_rows_note', '') + (
    f' | {replaced} rows (tokens per expert <= 64) re-measured with the warp-specialised decode kernel and the '
    f'decode-friendly prepack (row-level commit {commit}; {note}); the rows they replace are kept as variant '
    f'"<variant>_prev" (not fit inputs)')
dump(old, p)
print(f'w4a16: {replaced} rows replaced, {len(fresh)} added')

for name, keep in (('moe_permute', lambda r: r['variant'] == 'permute'), ('moe_combine', lambda r: True)):
    p = os.path.join(data, name + '.json')
    new = load(os.path.join(new_dir, name + '.json'))
    new['rows'] = [dict(r, commit=commit) for r in new['rows'] if keep(r)]
    new['commit'] = commit
    dump(new, p)
    print(f'{name}: {len(new["rows"])} rows')
