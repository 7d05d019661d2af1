#!/usr/bin/env python3
"""Merge the W4A16 DECODE rows of a run_w4g.sh table sweep (kernel 20 = kernel 17 with the wgmma groups pipelined per k-block, 3 CTAs per SM; issue 13, NOTES.md §19; the
new default at bt 8 on grids of more than 2 CTAs per SM) into
costmodels/data/h200/moe_grouped_gemm_w4a16.json. As results/w4e/merge_prefill_w4e.py, for the decode tiles: rows
with variant in {w4a16, w4a16_bt_alt}, shape.kernel_variant == KV and shape.bt <= 32 replace the committed row with
the same (variant, model, matrix, active_experts, tokens_per_expert, bt), which is kept with variant
"<variant>_prev" (not a fit input); new keys are not added. With OLD_SWEEP_JSON (the same run's sweep of the old
default) also prints the same-run speed ratio per replaced row. Prints new/old time per replaced row. Not idempotent:
run it once on the table before the merge (a second run would keep the merged rows as "<variant>_prev" too).
Usage: merge_decode_w4g.py NEW_TABLE_JSON KV COMMIT NOTE [OLD_SWEEP_JSON]
"""
import json, os, sys, statistics

new_p, kv, commit, note = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
same_p = sys.argv[5] if len(sys.argv) > 5 else None
p = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..', 'costmodels', 'data', 'h200',
                 'moe_grouped_gemm_w4a16.json')

def key(r):
    s = r['shape']
    return (r['variant'], s['model'], s['matrix'], s['active_experts'], s['tokens_per_expert'], s.get('bt'))

old = json.load(open(p))
new = json.load(open(new_p))
same = {key(r): r for r in json.load(open(same_p))['rows']} if same_p else {}
fresh = {}
for r in new['rows']:
    s = r['shape']
    if r['variant'] in ('w4a16', 'w4a16_bt_alt') and s.get('kernel_variant') == kv and (s.get('bt') or 999) <= 32:
        fresh[key(r)] = dict(r, commit=commit, note=note)
rows, changed = [], []
for r in old['rows']:
    k = key(r)
    if k in fresh:
        n = fresh.pop(k)
        rows.append(dict(r, variant=r['variant'] + '_prev'))
        rows.append(n)
        changed.append((k, r['us_median'], n['us_median'], same[k]['us_median'] if k in same else None))
    else:
        rows.append(r)
old['rows'] = rows
old['merged_rows_note'] = old.get('merged_rows_note', '') + (
    f' | {len(changed)} decode rows (bt <= 32) re-measured with kernel {kv} (kernel 17 with the wgmma groups pipelined per k-block, 3 CTAs per SM, '
    f'NOTES.md §19; row-level commit {commit}; {note}); the rows they replace are kept '
    f'as variant "<variant>_prev" (not fit inputs); 0 new keys added')
with open(p, 'w') as f:
    json.dump(old, f, indent=1)
    f.write('\n')
for k, o, n, s in changed:
    print(' '.join(map(str, k)), f'old {o:.2f} us new {n:.2f} us speedup {o / n:.3f}' +
          (f' same-run old-kernel {s:.2f} us same-run speedup {s / n:.3f}' if s else ''))
sp = [o / n for _, o, n, _ in changed]
print(f'{len(changed)} rows replaced, {len(fresh)} new keys skipped; committed/new min {min(sp):.3f} '
      f'median {statistics.median(sp):.3f} max {max(sp):.3f}')
ss = [s / n for _, _, n, s in changed if s]
if ss:
    print(f'same-run old-kernel/new over the replaced keys: min {min(ss):.3f} median {statistics.median(ss):.3f} '
          f'max {max(ss):.3f}')
