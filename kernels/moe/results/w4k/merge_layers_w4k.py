#!/usr/bin/env python3
"""Replace costmodels/data/h200/moe_layer_k3.json / moe_layer_dsv4.json by run_w4k.sh call 2's whole-layer tables
(bench_moe --only moe_layer_k3,moe_layer_dsv4 --w4-variants 25, NOTES.md §23), as results/w4h/merge_layers_w4h.py did
(whole tables, `remeasured_note` chained). Prints committed/new time per row key and the medians (all rows; rows at
bt 8 / 16). Usage: merge_layers_w4k.py NEW_DIR COMMIT NOTE
"""
import json, os, sys, statistics

new_dir, commit, note = sys.argv[1], sys.argv[2], sys.argv[3]
base = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..', 'costmodels', 'data', 'h200')

def key(r):
    s = r['shape']
    return (r['variant'], s['model'], s['tokens'], s['skew'])

for op in ('moe_layer_k3', 'moe_layer_dsv4'):
    p = os.path.join(base, op + '.json')
    old = json.load(open(p))
    new = json.load(open(os.path.join(new_dir, op + '.json')))
    om = {key(r): r for r in old['rows']}
    rat, rat16 = [], []
    for r in new['rows']:
        o = om.get(key(r))
        if not o:
            print(op, 'new key', key(r))
            continue
        x = o['us_median'] / r['us_median']
        rat.append(x)
        if r['shape'].get('bt') in (8, 16):
            rat16.append(x)
        print(op, ' '.join(map(str, key(r))), f"bt {r['shape'].get('bt')} old {o['us_median']:.1f} us new {r['us_median']:.1f} us old/new {x:.3f}")
    msg = (f'{op}: {len(new["rows"])} rows (old {len(old["rows"])}); old/new min {min(rat):.3f} median {statistics.median(rat):.3f} '
           f'max {max(rat):.3f}; rows at bt 8 / 16: {len(rat16)}, old/new median {statistics.median(rat16) if rat16 else 0:.3f} '
           f'min {min(rat16) if rat16 else 0:.3f} max {max(rat16) if rat16 else 0:.3f}')
    print(msg)
    new['remeasured_note'] = note + ' ' + msg + '. Previous note: ' + old.get('remeasured_note', '')
    new['commit'] = commit
    with open(p, 'w') as f:
        json.dump(new, f, indent=1)
        f.write('\n')
