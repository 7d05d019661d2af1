#!/usr/bin/env bash
# Size series of the speed benchmark (issue 15): the bench K3 cluster shape (prefill : decode EP32
# units = 2 : 5, attention TP 8) at U units each of 28 nodes, with 10,000 x nodes / 812 closed-loop
# agent sessions (a fixed load per node) for HORIZON simulated seconds (default 600, ramp 60 s).
# Prints one bench/run.sh line per size, then the least-squares exponent a of wall ∝ nodes^a and
# of wall per arrived request ∝ nodes^(a-1) (issue 15's target: a ≤ 1.05).
#
#   bench/series.sh SERVESIM [U ...]        default U: 1 2 4 8 16 29 (28 ... 812 nodes)
#   MODEL=v4pro bench/series.sh SERVESIM    the V4-Pro shape (EP16 units of 2 nodes, 2 : 5; U x 14 nodes)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$1"; shift
[ $# -gt 0 ] || set -- 1 2 4 8 16 29
horizon="${HORIZON:-600}"
model="${MODEL:-k3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for u in "$@"; do
  python3 - "$u" "$horizon" "$model" "$tmp/series-$model-u$u.json" <<'EOF'
import json, sys
u, horizon, model, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
name, mdl, ep, tp = ("k3-h200", "kimi-k3", 32, 8) if model == "k3" else ("v4pro-h200", "deepseek-v4-pro", 16, 1)
p, d = 2 * u, 5 * u
nodes = (p + d) * ep // 8
full = 812 if model == "k3" else 190
pool = lambda n: {"instances": n, "ep": ep, "attn_tp": tp, "two_batch_overlap": True}
s = {"name": f"series-{model}-{nodes}", "seed": 11, "horizon_s": horizon,
     "workload": {"kind": "agent", "loop": "closed", "concurrency": max(1, round(10000 * nodes / full)), "ramp_s": 60,
                  "shared_prefix_tokens": 4096, "block_tokens": 512},
     "timeline": {"enabled": False},
     "deployments": [{"name": name, "model": mdl, "hardware": "h200",
                      "prefill": dict(pool(p), max_batch_tokens=16384, chunk_tokens=8192),
                      "decode": dict(pool(d), max_running=128),
                      "kv_tiers": {"enabled": True}, "slo": {"ttft_s": 2.0, "tpot_s": 0.1}}]}
json.dump(s, open(out, "w"), indent=2)
EOF
done
"$here/run.sh" -b "$bin" $(for u in "$@"; do echo "$tmp/series-$model-u$u.json"; done) | tee "$tmp/lines"
# columns: scenario deployment nodes wall_s rss_mib sim/wall arrived completed
python3 - "$tmp/lines" <<'EOF'
import math, sys
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("series-")]
def slope(xs, ys):
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
if len(rows) >= 2:
    n = [math.log(float(r[2])) for r in rows]
    a = slope(n, [math.log(float(r[3])) for r in rows])
    b = slope(n, [math.log(float(r[3]) / max(1, int(r[6]))) for r in rows])
    print(f"# exponent: wall ~ nodes^{a:.3f}; wall per arrived request ~ nodes^{b:.3f}")
    for r in rows:
        print(f"#   {r[2]:>5} nodes: {1e6 * float(r[3]) / max(1, int(r[6])):8.1f} us of wall per arrived request")
EOF
