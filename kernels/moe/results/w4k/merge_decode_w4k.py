#!/usr/bin/env python3
"""Merge the W4A16 DECODE rows of run_w4k.sh call 2's G-8 table sweep under variant 25 (NOTES.md §23; issue 13, w4k)
into costmodels/data/h200/moe_grouped_gemm_w4a16.json: as results/w4h/merge_decode_w4h.py, rows with variant in
{w4a16, w4a16_bt_alt} and shape.kernel_variant in {25, 26} (the kernels variant 25 runs on one-wave grids; the other
rows of the sweep ran the same kernels as before and are not merged) replace the committed row with the same key, which
is kept as "<variant>_prev"; new keys are not added. Not idempotent. Usage: merge_decode_w4k.py NEW_TABLE_JSON COMMIT NOTE
"""
import json, os, sys, statistics

new_p, commit, note = sys.argv[1], sys.argv[2], sys.argv[3]
p = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..', 'costmodels', 'data', 'h200',
                 'moe_grouped_gemm_w4a16.json')

def key(r):
    s = r['shape']
    return (r['variant'], s['model'], s['matrix'], s['active_experts'], s['tokens_per_expert'], s.get('bt'))

old = json.load(open(p))
new = json.load(open(new_p))
fresh = {}
for r in new['rows']:
    s = r['shape']
    if r['variant'] in ('w4a16', 'w4a16_bt_alt') and s.get('kernel_variant') in (25, 26):
        fresh[key(r)] = dict(r, commit=commit, note=note)
rows, changed = [], []
for r in old['rows']:
    k = key(r)
    if k in fresh:
        n = fresh.pop(k)
        rows.append(dict(r, variant=r['variant'] + '_prev'))
        rows.append(n)
        changed.append((k, r['us_median'], n['us_median'], r['shape'].get('kernel_variant')))
    else:
        rows.append(r)
old['rows'] = rows
old['merged_rows_note'] = old.get('merged_rows_note', '') + (
    f' | {len(changed)} decode rows on one-wave grids re-measured under variant 25 (kernels 25 / 26 = kernels 17 / 20 with '
    f'the early prologue; NOTES.md §23; row-level commit {commit}; {note}); the rows they replace are kept as variant '
    f'"<variant>_prev" (not fit inputs); 0 new keys added')
with open(p, 'w') as f:
    json.dump(old, f, indent=1)
    f.write('\n')
for k, o, n, okv in changed:
    print(' '.join(map(str, k)), f'old (kernel {okv}) {o:.2f} us new {n:.2f} us speedup {o / n:.3f}')
sp = [o / n for _, o, n, _ in changed]
if sp:
    print(f'{len(changed)} rows replaced, {len(fresh)} new keys skipped; committed/new min {min(sp):.3f} '
          f'median {statistics.median(sp):.3f} max {max(sp):.3f}')
else:
    print('no rows replaced')
