#!/usr/bin/env python3
"""Merge the W4A16 PREFILL rows of a run_w4pf.sh table sweep (variant 8) into
costmodels/data/h200/moe_grouped_gemm_w4a16.json (issue 13, NOTES.md §13).

Taken from the new table: rows with variant in {w4a16, w4a16_bt_alt}, shape.kernel_variant == 8 and
shape.bt in BTS (default 256: the tile width the prefill kernel was shown faster at). Every committed row
with the same (variant, model, matrix, active_experts, tokens_per_expert, bt) is kept with variant
"<variant>_prev" (not a fit input: samples.cpp takes variant "w4a16" only) and the new row takes its place.
New keys (e.g. tokens per expert beyond the committed grid) are NOT added unless ADD_NEW=1.
Usage: merge_prefill.py NEW_TABLE_JSON COMMIT NOTE [BTS, e.g. 256 or 128,256]
"""
import json, os, sys

new_p, commit, note = sys.argv[1], sys.argv[2], sys.argv[3]
bts = {int(b) for b in (sys.argv[4] if len(sys.argv) > 4 else '256').split(',')}
p = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'costmodels', 'data', 'h200', 'moe_grouped_gemm_w4a16.json')

def key(r):
    s = r['shape']
    return (r['variant'], s['model'], s['matrix'], s['active_experts'], s['tokens_per_expert'], s.get('bt'))

old = json.load(open(p))
new = json.load(open(new_p))
fresh = {}
for r in new['rows']:
    s = r['shape']
    if r['variant'] in ('w4a16', 'w4a16_bt_alt') and s.get('kernel_variant') == 8 and s.get('bt') in bts:
        fresh[key(r)] = dict(r, commit=commit, note=note)
rows, replaced, changed = [], 0, []
for r in old['rows']:
    k = key(r)
    if k in fresh:
        n = fresh.pop(k)
        rows.append(dict(r, variant=r['variant'] + '_prev'))
        rows.append(n)
        replaced += 1
        changed.append((k, r['us_median'], n['us_median']))
    else:
        rows.append(r)
added = list(fresh.values()) if os.environ.get('ADD_NEW') == '1' else []
rows.extend(added)
old['rows'] = rows
old['merged_rows_note'] = old.get('merged_rows_note', '') + (
    f' | {replaced} prefill rows (bt in {sorted(bts)}) re-measured with variant 8 (TMA producer + dequantisation '
    f'warpgroup + SS wgmma consumers; row-level commit {commit}; {note}); the rows they replace are kept as variant '
    f'"<variant>_prev" (not fit inputs); {len(added)} new keys added')
with open(p, 'w') as f:
    json.dump(old, f, indent=1)
    f.write('\n')
print(f'{replaced} rows replaced, {len(added)} added, {len(fresh) - len(added)} new keys skipped')
for k, a, b in changed:
    print(f'  {k}: {a:.1f} -> {b:.1f} us ({a / b:.2f}x)')
