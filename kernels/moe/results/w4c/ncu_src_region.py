import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[1]; data = rows[2:]
ix = {h: i for i, h in enumerate(hdr)}
stalls = [h for h in hdr if h.startswith('stall_') and '(Not Issued)' not in h]
tot = sum(int(r[ix['Warp Stall Sampling (All Samples)']] or 0) for r in data)
regions = [(int(a.split(':')[0]), int(a.split(':')[1]), a.split(':')[2]) for a in sys.argv[2:]]
for lo, hi, name in regions:
    seg = data[lo:hi]
    s = sum(int(r[ix['Warp Stall Sampling (All Samples)']] or 0) for r in seg)
    ins = sum(int(r[ix['Instructions Executed']] or 0) for r in seg)
    by = sorted(((sum(int(r[ix[h]] or 0) for r in seg), h[6:]) for h in stalls), reverse=True)[:7]
    print(f"{name}: {100*s/tot:.1f}% of samples, {ins} warp instr; " + ', '.join(f'{h} {100*v/max(s,1):.0f}%' for v, h in by))
