#!/usr/bin/env python3
"""Library reference for the FP8 dense projection GEMM (issue 13): times torch._scaled_mm (e4m3 x e4m3
-> bf16) at given (M, N, K) points, with DeepSeek-style block scales (1x128 activations, 128x128
weights) where this torch offers them, else row-wise scales (one fp32 per token row and per output
channel: not the same math, recorded in the row's "scales" field). Rotates over weight sets > 3x L2.
Writes one servesim.kernel-table/1 JSON (op dense_proj_fp8_torch, variant torch_scaled_mm_<scales>).
Usage: python3 dense_fp8_torch_ref.py --out DIR --points M:N:K,... [--deadline-s S]"""
import argparse, json, os, time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--points", required=True)
ap.add_argument("--deadline-s", type=float, default=60)
ap.add_argument("--commit", default=os.environ.get("SERVESIM_COMMIT", "unknown"))
a = ap.parse_args()
T0 = time.time()
dev = torch.device("cuda")
L2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 60 * 2**20)


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


def graph_time(fn, sets, calls):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(2): fn(i % sets)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        for i in range(calls): fn(i % sets)
    t = timeit(lambda i: g.replay(), 1, warm=2, runs=10, min_ms=5)
    return {k: (v / calls if k != "runs" else v * calls) for k, v in t.items()}


def rand_fp8(shape):
    return ((torch.rand(shape, device=dev) * 2 - 1) * 8).to(torch.float8_e4m3fn)


def block_call(M, N, K):
    """Returns (scales name, callable(x, w, sa, sb)) for the first scaling torch accepts here."""
    x = rand_fp8((M, K)); w = rand_fp8((N, K))
    tries = []
    # block-wise: scale_a (M, K/128) 1x128 (given "MN-major", as DeepGEMM/cuBLASLt take it), scale_b (N/128, K/128)
    sa = torch.rand((K // 128, M), device=dev).t() + 0.5
    sb = torch.rand(((N + 127) // 128, K // 128), device=dev) + 0.5
    tries.append(("block_1x128_128x128", sa, sb, sb.t()))
    sa2 = torch.rand((M, K // 128), device=dev) + 0.5
    tries.append(("block_1x128_128x128_kmajor", sa2, sb, sb.t()))
    tries.append(("rowwise", torch.rand((M, 1), device=dev) + 0.5, torch.rand((1, N), device=dev) + 0.5, None))
    err = []
    for name, sa_, sb_, sbt in tries:
        for b_scale in ([sbt, sb_] if sbt is not None else [sb_]):
            try:
                torch._scaled_mm(x, w.t(), scale_a=sa_, scale_b=b_scale, out_dtype=torch.bfloat16)
                torch.cuda.synchronize()
                return name, sa_, b_scale, None
            except Exception as e:  # noqa: BLE001
                err.append(f"{name}: {str(e).splitlines()[0][:160]}")
    return None, None, None, err


rows, notes = [], []
for pt in a.points.split(","):
    if time.time() - T0 > a.deadline_s: notes.append("deadline reached"); break
    M, N, K = (int(v) for v in pt.split(":"))
    name, sa, sb, err = block_call(M, N, K)
    if name is None:
        notes.append(f"{pt}: no scaling accepted: {err}")
        print(pt, "no scaling accepted", err, flush=True)
        continue
    sets = max(1, min(16, int(3 * L2 / (N * K) + 1)))
    ws = [rand_fp8((N, K)) for _ in range(sets)]
    x = rand_fp8((M, K))
    fn = lambda i: torch._scaled_mm(x, ws[i].t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    t = timeit(fn, sets)
    tim = "cuda_events_per_call"
    eager = t["us_median"]
    if eager < 400:
        try:
            t = graph_time(fn, sets, max(8, min(128, int(1500 / max(eager, 1.0)))))
            tim = "cuda_graph_replay"
        except Exception as e:  # noqa: BLE001
            notes.append(f"{pt}: graph failed: {e}")
    fl = 2.0 * M * N * K
    by = M * K + N * K + 2 * M * N
    r = {"variant": "torch_scaled_mm_" + name, "shape": {"M": M, "N": N, "K": K, "batch": 1},
         "dtypes": {"in": "fp8_e4m3", "out": "bf16", "scales": name}, "flops": fl, "bytes": by,
         "tflops": fl / t["us_median"] / 1e6, "tbps": by / t["us_median"] / 1e6, "timing": tim,
         "us_median_eager": eager, **t}
    rows.append(r)
    print(f"torch {name:28s} M {M:6d} N {N:6d} K {K:6d} {t['us_median']:9.2f} us (eager {eager:8.2f}) "
          f"{r['tflops']:8.1f} TF/s {r['tbps']:6.3f} TB/s", flush=True)

os.makedirs(a.out, exist_ok=True)
doc = {"schema": "servesim.kernel-table/1", "op": "dense_proj_fp8_torch", "model": "reference", "commit": a.commit,
       "gpu": {"name": torch.cuda.get_device_name(0), "torch": torch.__version__},
       "description": "torch._scaled_mm e4m3 -> bf16 (block 1x128/128x128 scales where accepted, else row-wise), library reference beside the own FP8 dense GEMM and cuBLASLt",
       "flop_formula": "2*M*N*K", "byte_formula": "M*K + N*K + 2*M*N",
       "method": {"timer": "torch.cuda.Event; CUDA-graph replay when a call < 400 us", "rotation": "weight sets > 3x L2"},
       "notes": notes, "rows": rows}
with open(os.path.join(a.out, "dense_proj_fp8_torch.json"), "w") as f:
    json.dump(doc, f, indent=1)
print("torch rows", len(rows), "notes", notes)
