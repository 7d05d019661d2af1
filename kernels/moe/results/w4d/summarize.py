# w4d: per-point v11 vs v14 from bench_pf1/2.txt, and the ncu source-page stall regions of v14 / v11
# (SASS line numbers of the source CSVs in diag.tar.gz; python3 summarize.py [dir with ncu_src_v*.csv])
import csv, re, statistics as st, sys
def parse(f):
    d = {}
    for l in open(f):
        m = re.match(r"w4pf (\S+) (\S+) G=8 m=(\d+): cublas_dense ([\d.]+) us(.*)", l)
        if not m: continue
        t = dict((v, float(x)) for v, x in re.findall(r"v(\d+) ([\d.]+) us", m.group(5)))
        d[(m.group(1), m.group(2), int(m.group(3)))] = (float(m.group(4)), t['11'], t['14'])
    return d
p = [parse('bench_pf1.txt'), parse('bench_pf2.txt')]
for lo, hi in [(1024, 4096), (256, 512), (128, 128)]:
    for i in (0, 1):
        sp = [v[1] / v[2] for k, v in p[i].items() if lo <= k[2] <= hi]
        print(f"m {lo}..{hi} pass {i+1}: v14 speed / v11 median {st.median(sp):.3f} min {min(sp):.3f} max {max(sp):.3f} ({len(sp)} points, v14 slower at {sum(s < 1 for s in sp)})")
print("| shape | m | pass 1: dense, v11, v14 | pass 2 (14 first): dense, v11, v14 | v14 speed / v11 |")
for k in sorted(p[0]):
    if k[2] < 512: continue
    a, b = p[0][k], p[1][k]
    print(f"| {k[0]} {k[1]} | {k[2]} | {a[0]:.1f}, {a[1]:.1f} ({a[0]/a[1]:.3f}), {a[2]:.1f} ({a[0]/a[2]:.3f}) | "
          f"{b[0]:.1f}, {b[1]:.1f} ({b[0]/b[1]:.3f}), {b[2]:.1f} ({b[0]/b[2]:.3f}) | {a[1]/a[2]:.2f} / {b[1]/b[2]:.2f} |")
d = sys.argv[1] if len(sys.argv) > 1 else '.'
regions = {14: {'consumers wait full_a': [264, 265, 429, 444], 'consumers wait full_l': [261, 262, 426, 427],
                'decoders wait full_l': [1202, 1205], 'decoders wait empty_a': [1206, 1208],
                'decoders fence + arrive': [1382, 1383], 'consumer part [9,1164)': range(9, 1164),
                'decoder part [1164,end)': range(1164, 10**6)},
           11: {'consumers wait full_a': [195, 196, 301, 303], 'consumers wait full_l': [192, 193, 296, 299],
                'decoders wait full_l': [1003, 1004], 'decoders wait empty_a': [1006, 1012],
                'decoders fence + arrive': [1253, 1258], 'consumer part [9,968)': range(9, 968),
                'decoder part [968,1262)': range(968, 1262), 'producer warp [1262,end)': range(1262, 10**6)}}
for v in (14, 11):
    try: rows = list(csv.reader(open(f'{d}/ncu_src_v{v}.csv')))
    except OSError: continue
    hdr, data = rows[1], rows[2:]; ix = {h: i for i, h in enumerate(hdr)}
    S = [int(r[ix['Warp Stall Sampling (All Samples)']] or 0) for r in data]
    I = [int(r[ix['Instructions Executed']] or 0) for r in data]
    print(f"v{v}: {sum(S)} samples, {sum(I)} warp instructions")
    for name, ls in regions[v].items():
        ls = [l for l in ls if l < len(S)]
        print(f"  {name}: {100*sum(S[l] for l in ls)/sum(S):.1f}% of samples, {sum(I[l] for l in ls)} warp instr")
