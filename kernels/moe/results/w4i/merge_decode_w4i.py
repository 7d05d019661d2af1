#!/usr/bin/env python3
"""Merge the bt-32 W4A16 DECODE rows of run_w4i.sh call 2's table sweep (kernel 20 at bt 32, built for 2 CTAs per SM, the
default of variant 20 since NOTES.md §21; issue 13, w4i; a copy of results/w4h/merge_decode_w4h.py with its note) into costmodels/data/h200/moe_grouped_gemm_w4a16.json. As results/w4g/merge_decode_w4g.py
with a tile-width filter: rows with variant in {w4a16, w4a16_bt_alt}, shape.kernel_variant == KV and shape.bt == BT
replace the committed row with the same (variant, model, matrix, active_experts, tokens_per_expert, bt), which is kept
with variant "<variant>_prev" (not a fit input); new keys are not added. Prints new/old time per replaced row. Not
idempotent: run it once on the table before the merge (a second run would keep the merged rows as "<variant>_prev" too).
Usage: merge_decode_w4h.py NEW_TABLE_JSON KV BT COMMIT NOTE
"""
import json, os, sys, statistics

new_p, kv, bt, commit, note = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
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
    if r['variant'] in ('w4a16', 'w4a16_bt_alt') and s.get('kernel_variant') == kv and s.get('bt') == bt:
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
    f' | {len(changed)} decode rows at bt {bt} re-measured with kernel {kv} (kernel 20 at bt 32 built for 2 CTAs per SM: '
    f'__launch_bounds__(288, 2), 6 stages, 92 registers, no C7512; NOTES.md §21; row-level commit {commit}; {note}); the rows they replace (kernel 17) are kept as variant "<variant>_prev" (not fit inputs); '
    f'0 new keys added')
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
