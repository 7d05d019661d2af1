#!/usr/bin/env python3
"""Merge the W4A16 PREFILL rows of a run_w4e.sh table sweep (the new default variant) into
costmodels/data/h200/moe_grouped_gemm_w4a16.json (issue 13, NOTES.md §17). results/w4c/merge_prefill_w4c.py with
the kernel's description as an argument: rows with variant in {w4a16, w4a16_bt_alt}, shape.kernel_variant == KV
and shape.bt == 256 replace the committed row with the same (variant, model, matrix, active_experts,
tokens_per_expert, bt), which is kept with variant "<variant>_prev" (not a fit input); new keys are not added.
Prints new/old time per replaced row.
Usage: merge_prefill_w4e.py NEW_TABLE_JSON KV COMMIT NOTE KERNEL_DESCRIPTION
"""
import json, os, sys, statistics

new_p, kv, commit, note, desc = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
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
    if r['variant'] in ('w4a16', 'w4a16_bt_alt') and s.get('kernel_variant') == kv and s.get('bt') == 256:
        fresh[key(r)] = dict(r, commit=commit, note=note)
rows, changed = [], []
for r in old['rows']:
    k = key(r)
    if k in fresh:
        n = fresh.pop(k)
        rows.append(dict(r, variant=r['variant'] + '_prev'))
        rows.append(n)
        changed.append((k, r['us_median'], n['us_median']))
    else:
        rows.append(r)
old['rows'] = rows
old['merged_rows_note'] = old.get('merged_rows_note', '') + (
    f' | {len(changed)} prefill rows (bt 256) re-measured with variant {kv} ({desc}; row-level commit {commit}; '
    f'{note}); the rows they replace are kept as variant "<variant>_prev" (not fit inputs); 0 new keys added')
with open(p, 'w') as f:
    json.dump(old, f, indent=1)
    f.write('\n')
for k, o, n in changed:
    print(' '.join(map(str, k)), f'old {o:.1f} us new {n:.1f} us speedup {o / n:.3f}')
sp = [o / n for _, o, n in changed]
print(f'{len(changed)} rows replaced, {len(fresh)} new keys skipped; speedup old/new min {min(sp):.3f} '
      f'median {statistics.median(sp):.3f} max {max(sp):.3f}')
