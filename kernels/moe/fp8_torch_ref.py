#!/usr/bin/env python3
"""Library reference for the FP8 grouped GEMM (issue 13): times torch._scaled_grouped_mm (e4m3,
row-wise scales: one fp32 per token row and one per weight output channel, bf16 out) over the grid
of moe_grouped_gemm_fp8.json (same shape fields) and DeepGEMM's reference points, and writes one
servesim.kernel-table/1 JSON (variant torch_scaled_grouped_mm_rowwise).

Row-wise scales are NOT DeepSeek's 1x128 / 128x128 blocks: this is the nearest library kernel, not
the same math. The 2D x 3D form (offs) needs group row counts that are multiples of 16: m is padded
to a multiple of 16 (shape field M_run), as engines do.
Usage: python3 fp8_torch_ref.py --out DIR [--deadline-s S] [--commit C]"""
import argparse, json, os, time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--deadline-s", type=float, default=60)
ap.add_argument("--commit", default=os.environ.get("SERVESIM_COMMIT", "unknown"))
ap.add_argument("--experts", default="8,32", help="active experts of the grid sweep (comma list)")
ap.add_argument("--max-m", type=int, default=1 << 30, help="largest tokens per expert of the grid sweep")
ap.add_argument("--no-deepgemm", action="store_true", help="skip the DeepGEMM reference shapes")
a = ap.parse_args()
T0 = time.time()
dev = torch.device("cuda")
props = torch.cuda.get_device_properties(0)
L2 = getattr(props, "L2_cache_size", 60 * 2**20)

SHAPES = [("K3", "w13", 6144, 3584), ("K3", "w2", 3584, 3072), ("DSV4-Pro", "w13", 6144, 7168),
          ("DSV4-Pro", "w2", 7168, 3072), ("DSV4-Flash", "w13", 4096, 4096), ("DSV4-Flash", "w2", 4096, 2048)]


def grid(lo, hi):
    v, p = set(), 1
    while p <= hi:
        if p >= lo: v.add(p)
        m = p * 3 // 2
        if m > p and lo <= m <= hi: v.add(m)
        p *= 2
    return sorted(v)


def timeit(fn, sets, warm=3, runs=20, min_ms=10.0):
    for i in range(warm): fn(i % sets)
    torch.cuda.synchronize()
    us, tot = [], 0.0
    for i in range(10 * runs):
        if i >= runs and tot >= min_ms: break
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(i % sets); e.record(); e.synchronize()
        ms = s.elapsed_time(e); us.append(ms * 1e3); tot += ms
    us.sort()
    q = lambda f: us[min(len(us) - 1, int(f * (len(us) - 1) + 0.5))]
    return {"us_median": q(0.5), "us_p10": q(0.1), "us_p90": q(0.9), "runs": len(us)}


def rand_fp8(shape):
    return (torch.rand(shape, device=dev) * 2 + 0.25).to(torch.float8_e4m3fn)


rows = []
log = []


def add(model, matrix, G, m, N, K, Mrun, t, extra=None):
    fl = 2.0 * G * m * N * K
    by = G * N * K + G * m * K + 2.0 * G * m * N
    shape = {"model": model, "matrix": matrix, "active_experts": G, "tokens_per_expert": m, "rows": G * m, "N": N,
             "K": K, "skew": 0.0, "M_run": Mrun}
    r = {"variant": "torch_scaled_grouped_mm_rowwise", "shape": shape,
         "dtypes": {"w": "e4m3_rowwise", "a": "e4m3_rowwise", "out": "bf16", "acc": "fp32"}, **t,
         "flops": fl, "bytes": by, "tflops": fl / t["us_median"] / 1e6, "tbps": by / t["us_median"] / 1e6}
    if extra: r.update(extra)
    rows.append(r)


def run_shape(model, matrix, N, K, Gs, ms):
    for G in Gs:
        wbytes = G * N * K
        sets = max(1, min(8 if G >= 8 else 32, -(-3 * L2 // wbytes)))
        W = [rand_fp8((G, N, K)) for _ in range(sets)]  # [G, N, K] row-major -> mat_b = W.transpose(-2,-1)
        SW = [torch.rand(G, N, device=dev) * 0.5 + 0.5 for _ in range(sets)]
        for m in ms(G):
            if time.time() - T0 > a.deadline_s: return
            Mrun = (m + 15) // 16 * 16
            X = rand_fp8((G * Mrun, K))
            SX = torch.rand(G * Mrun, device=dev) * 0.5 + 0.5
            offs = torch.arange(1, G + 1, device=dev, dtype=torch.int32) * Mrun
            fn = lambda i: torch._scaled_grouped_mm(X, W[i].transpose(-2, -1), SX, SW[i], offs=offs, out_dtype=torch.bfloat16)
            try:
                t = timeit(fn, sets)
            except Exception as ex:  # noqa: BLE001
                log.append(f"torch _scaled_grouped_mm {model} {matrix} G={G} m={m}: {type(ex).__name__}: {str(ex)[:200]}")
                print(log[-1], flush=True)
                return
            add(model, matrix, G, m, N, K, Mrun, t)
            if m in (1, 16, 64, 256, 512, 1024, 2048, 4096, 8192):
                fl = 2.0 * G * m * N * K
                print(f"torch scaled_grouped_mm {model} {matrix} G={G} m={m}: {t['us_median']:.1f} us, "
                      f"{fl / t['us_median'] / 1e6:.0f} TFLOP/s, weights {wbytes / t['us_median'] / 1e6:.2f} TB/s", flush=True)
        del W, SW
        torch.cuda.empty_cache()


# correctness spot check against a float reference (row-wise scales)
G, m, N, K = 3, 32, 256, 512
X = rand_fp8((G * m, K)); W = rand_fp8((G, N, K)); SX = torch.rand(G * m, device=dev) + 0.5; SW = torch.rand(G, N, device=dev) + 0.5
offs = torch.arange(1, G + 1, device=dev, dtype=torch.int32) * m
try:
    Y = torch._scaled_grouped_mm(X, W.transpose(-2, -1), SX, SW, offs=offs, out_dtype=torch.bfloat16).double()
    ref = torch.cat([(X[g * m:(g + 1) * m].double() @ W[g].double().T) * SX[g * m:(g + 1) * m, None].double() * SW[g][None].double()
                     for g in range(G)])
    print(f"torch _scaled_grouped_mm check: rel L2 {((Y - ref).norm() / ref.norm()).item():.2e}", flush=True)
except Exception as ex:  # noqa: BLE001
    print(f"torch _scaled_grouped_mm unavailable: {type(ex).__name__}: {str(ex)[:300]}", flush=True)

if not a.no_deepgemm:
    run_shape("DeepGEMM", "w13_like", 4096, 7168, [8], lambda G: [512, 1024, 2048, 4096])
    run_shape("DeepGEMM", "w2_like", 7168, 2048, [8], lambda G: [512, 1024, 2048, 4096])
EXPERTS = [int(x) for x in a.experts.split(",") if x]
for model, matrix, N, K in SHAPES:
    run_shape(model, matrix, N, K, EXPERTS, lambda G: grid(1, min(32768 // G, a.max_m)))

out = {"schema": "servesim.kernel-table/1", "op": "moe_grouped_gemm_fp8", "model": "K3, DSV4-Pro, DSV4-Flash",
       "description": "Library reference: torch._scaled_grouped_mm (PyTorch " + torch.__version__ + ", e4m3 with row-wise "
       "scales, not 1x128/128x128 blocks; 2D x 3D form, one launch, group rows padded to 16 = M_run), bf16 out",
       "flop_formula": "2*G*m*N*K", "byte_formula": "G*N*K weight bytes + G*m*K + 2*G*m*N", "commit": a.commit,
       "gpu": {"name": props.name, "sm_count": props.multi_processor_count, "l2_bytes": L2,
               "hbm_bytes": props.total_memory, "torch": torch.__version__},
       "method": {"timer": "torch.cuda.Event around each call", "statistic": "median, p10, p90 over timed runs after warm-up",
                  "rotation": "weights rotated over sets whose total exceeds 3x L2"},
       "rows": rows, "log": log}
os.makedirs(a.out, exist_ok=True)
with open(os.path.join(a.out, "moe_grouped_gemm_fp8_torch.json"), "w") as f:
    json.dump(out, f, indent=1)
print(f"torch reference: {len(rows)} rows in {time.time() - T0:.0f} s", flush=True)
