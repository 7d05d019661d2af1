# w4e call 1: per-point v11 / v14 / v15 from call1_bench_pf1/2.txt (pass 1 order 11,14,15; pass 2 15,14,11) and the ncu
# source-page stall regions of v14 / v15 (SASS line numbers of the source CSVs in call1_diag.tar.gz;
# python3 summarize.py [dir with ncu_src_v*.csv])
import csv, re, statistics as st, sys
def parse(f):
    d = {}
    for l in open(f):
        m = re.match(r"w4pf (\S+) (\S+) G=8 m=(\d+): cublas_dense ([\d.]+) us(.*)", l)
        if not m: continue
        t = dict((int(v), float(x)) for v, x in re.findall(r"v(\d+) ([\d.]+) us", m.group(5)))
        t[-1] = float(m.group(4))
        d[(m.group(1), m.group(2), int(m.group(3)))] = t
    return d
p = [parse('call1_bench_pf1.txt'), parse('call1_bench_pf2.txt')]
for a, b in ((11, 14), (11, 15), (14, 15)):
    for lo, hi in [(1024, 4096), (256, 512), (128, 128)]:
        s = []
        for i in (0, 1):
            sp = [v[a] / v[b] for k, v in p[i].items() if lo <= k[2] <= hi]
            s.append(f"pass {i+1} median {st.median(sp):.3f} ({min(sp):.3f}-{max(sp):.3f}, slower at {sum(x < 1 for x in sp)} of {len(sp)})")
        print(f"v{b} speed / v{a}, m {lo}..{hi}: " + "; ".join(s))
for v in (11, 14, 15):
    for i in (0, 1):
        r = sorted(p[i][k][-1] / p[i][k][v] for k in p[i] if k[2] >= 1024)
        print(f"v{v} pass {i+1}: fraction of dense at m >= 1024: lower median {r[(len(r) - 1) // 2]:.3f}, min {r[0]:.3f}, max {r[-1]:.3f}")
print("| shape | m | pass 1: dense, v11, v14, v15 | pass 2 (15 first): dense, v11, v14, v15 |")
f = lambda t: f"{t[-1]:.1f}, " + ", ".join(f"{t[v]:.1f} ({t[-1]/t[v]:.3f})" for v in (11, 14, 15))
for k in sorted(p[0]):
    if k[2] < 512: continue
    print(f"| {k[0]} {k[1]} | {k[2]} | {f(p[0][k])} | {f(p[1][k])} |")
d = sys.argv[1] if len(sys.argv) > 1 else '.'
regions = {14: {'consumers wait full_l': [261, 262, 426, 427], 'consumers wait full_a': [264, 265, 429, 444],
                'decoders wait full_l': [1202, 1205], 'decoders wait empty_a': [1206, 1208],
                'decoders fence + arrive': [1381, 1382, 1383], 'consumer part [9,1164)': range(9, 1164),
                'decoder part [1164,end)': range(1164, 10**6)},
           15: {'consumers wait full_l': [268, 269, 437, 438], 'consumers wait full_a': [271, 272, 440, 455],
                'decoders wait full_w': [1216, 1219], 'decoders wait empty_a': [1220, 1222],
                'decoders fence + arrive': [1395, 1396, 1397], 'consumer part [9,1178)': range(9, 1178),
                'decoder part [1178,end)': range(1178, 10**6)}}
for v in (14, 15):
    try: rows = list(csv.reader(open(f'{d}/ncu_src_v{v}.csv')))
    except OSError: continue
    hdr, data = rows[1], rows[2:]; ix = {h: i for i, h in enumerate(hdr)}
    S = [int(r[ix['Warp Stall Sampling (All Samples)']] or 0) for r in data]
    I = [int(r[ix['Instructions Executed']] or 0) for r in data]
    print(f"v{v}: {sum(S)} samples, {sum(I)} warp instructions")
    for name, ls in regions[v].items():
        ls = [l for l in ls if l < len(S)]
        print(f"  {name}: {100 * sum(S[l] for l in ls) / sum(S):.1f}% of samples, {sum(I[l] for l in ls)} warp instr")
