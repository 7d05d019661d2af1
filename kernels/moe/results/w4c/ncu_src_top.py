import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[1]; data = rows[2:]
ix = {h: i for i, h in enumerate(hdr)}
stalls = [h for h in hdr if h.startswith('stall_') and '(Not Issued)' not in h]
tot = sum(int(r[ix['Warp Stall Sampling (All Samples)']] or 0) for r in data)
print('total samples', tot, 'instructions', len(data))
thr = float(sys.argv[2]) if len(sys.argv) > 2 else 0.004
for n, r in enumerate(data):
    s = int(r[ix['Warp Stall Sampling (All Samples)']] or 0)
    src = r[ix['Source']].strip()
    mark = any(k in src for k in ('HGMMA', 'STSM', 'SYNCS', 'UTMALDG', 'UBLKCP', 'MEMBAR', 'FENCE', 'BAR', 'WARPGROUP', 'BRA', 'LDS', 'DEPBAR'))
    if s >= thr * tot or (mark and s > 0.001 * tot):
        top = sorted(((int(r[ix[h]] or 0), h[6:]) for h in stalls), reverse=True)[:3]
        print(f"{n:5d} {100*s/tot:5.1f}% ex={r[ix['Instructions Executed']]:>9} {src[:60]:60s} " + ' '.join(f'{h}:{100*v/tot:.1f}' for v, h in top if v))
