#!/usr/bin/env python3
"""Library reference timings beside servesim's attention kernels (issue 12), run on the GPU machine.

  python3 kernels/attention/torch_ref.py --out DIR [--budget S] [--ops mla_prefill,absorb] [--quick]
                                        [--heads 96,48,24,12] [--skip-existing TABLE.json]
                                        [--points N:P:H,...] [--prefill-backends cudnn,flash]

mla_prefill: the MHA-form MLA prefill core (causal chunk of N queries over a cached prefix of P,
  d_qk 192, d_v 128, H heads) through PyTorch's cuDNN fused attention, at the (chunk, prefix, heads)
  grid of bench_attn's mla_prefill sweep (heads 96/48/24/12, powers of two and x1.5 points of N in
  [256, 16384], P in {0, 1K, ..., 1M}, at most 6e13 FLOP and 40 GB of K/V). Q/K/V live token-major
  ([T, H, d], as servesim's kernel reads them) and are passed as strided views. With a prefix the
  mask is bottom-right aligned (query i sees keys 0..P+i). If cuDNN's causal flag with P > 0 is
  checked bottom-right aligned (against an fp32 reference at start-up), one call is timed (variant
  torch_sdpa_cudnn); otherwise two cuDNN calls (prefix keys without mask, chunk keys causal) merged
  by their log-sum-exp (variant torch_sdpa_cudnn_split, the merge's elementwise kernels included).
v4_indexer / v4_topk: torch.bmm / torch._scaled_mm (FP8) and torch.topk at the V4 decode shapes of
  csa_indexer / csa_topk (see bench_v4_indexer / bench_v4_topk).
absorb: the K3 MLA absorption GEMMs (w_uk_absorb: per head q_nope[M,h,0:128] @ W[h,128,512];
  w_uv: o_lat[M,h,0:512] @ W[h,512,128]) through torch.bmm on the same strided views, M as in
  dense_proj_k3_mla, 96 heads.
Timing as bench_attn: CUDA events per call (us_median_eager), then, when a call takes < 400 us, a
CUDA graph of G calls replayed (us_median = per-call mean of a replay, median over replays); inputs
rotated over sets larger than 3x L2. Writes DIR/<op>_torch.json in servesim.kernel-table/1.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

L2 = 60 * 1024 * 1024


def gpu_info():
    p = torch.cuda.get_device_properties(0)
    drv = "unknown"
    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
    except Exception:
        pass
    return {"name": p.name, "driver": drv, "sm_count": p.multi_processor_count, "l2_bytes": getattr(p, "L2_cache_size", L2),
            "hbm_bytes": p.total_memory, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "cuda_runtime": torch.version.cuda}


def sm_clock():
    try:
        return int(subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
                                  capture_output=True, text=True).stdout.strip())
    except Exception:
        return -1


def nsets(nbytes, cap=16):
    return max(1, min(cap, math.ceil(3 * L2 / max(nbytes, 1))))


def q3(xs):
    xs = sorted(xs)
    f = lambda p: xs[min(len(xs) - 1, max(0, int(round(p * (len(xs) - 1)))))]
    return f(0.5), f(0.1), f(0.9)


def time_fn(fn, nset, max_s=0.25):
    """fn(i) runs call i (input set i % nset). Returns the row's timing fields."""
    fn(0)
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    ev[0].record(); fn(1); ev[1].record(); torch.cuda.synchronize()
    est = ev[0].elapsed_time(ev[1]) * 1e3  # us
    reps = int(max(5, min(200, max_s * 1e6 / max(est, 1.0))))
    us = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(i); b.record()
        torch.cuda.synchronize()
        us.append(a.elapsed_time(b) * 1e3)
    med, p10, p90 = q3(us)
    row = {"timing": "cuda_events_per_call", "us_median_eager": med, "us_median": med, "us_p10": p10, "us_p90": p90,
           "runs": reps}
    if med < 400:
        G = int(max(8, min(128, 1500 / max(med, 1.0))))
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for i in range(3):
                    fn(i)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i in range(G):
                    fn(i)
            g.replay(); torch.cuda.synchronize()
            R = int(max(10, min(60, 0.2e6 / (G * med))))
            per = []
            for _ in range(R):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(); g.replay(); b.record(); torch.cuda.synchronize()
                per.append(a.elapsed_time(b) * 1e3 / G)
            med, p10, p90 = q3(per)
            row.update({"timing": "cuda_graph_replay", "us_median": med, "us_p10": p10, "us_p90": p90, "graph_calls": G,
                        "runs": R * G})
            del g
        except Exception as e:  # graph capture refused: keep the eager figures
            row["graph_error"] = str(e)[:200]
    return row


def grid(lo, hi, mid=True):
    v, x = set(), 1
    while x <= hi:
        if x >= lo:
            v.add(x)
        if mid and x >= 2 and lo <= x * 3 // 2 <= hi:
            v.add(x * 3 // 2)
        x *= 2
    return sorted(v)


class Table:
    def __init__(self, op, model, desc, ff, bf, gi, commit):
        self.j = {"schema": "servesim.kernel-table/1", "op": op, "model": model, "description": desc, "flop_formula": ff,
                  "byte_formula": bf, "gpu": gi, "commit": commit,
                  "method": {"timer": "cudaEventElapsedTime around each call; CUDA graph replay below 400 us",
                             "statistic": "median, p10, p90 over timed runs after warm-up",
                             "rotation": "inputs rotated over sets whose total exceeds 3x L2"},
                  "rows": []}

    def add(self, variant, shape, dtypes, t, flops, nbytes, extra=None):
        s = t["us_median"] * 1e-6
        r = {"variant": variant, "shape": shape, "dtypes": dtypes, "flops": flops, "bytes": nbytes,
             "tflops": flops / s / 1e12 if s > 0 else 0.0, "tbps": nbytes / s / 1e12 if s > 0 else 0.0, "library": "torch"}
        r.update(t)
        if extra:
            r.update(extra)
        self.j["rows"].append(r)

    def write(self, path):
        self.j["gpu"]["sm_clock_mhz_after_sweep"] = sm_clock()
        with open(path, "w") as f:
            json.dump(self.j, f, indent=1)


# ------------------------------------------------------------------------------------------------
SCALE = 1.0 / math.sqrt(192.0)


def cudnn_attn(q, k, v, causal):
    r = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False, scale=SCALE)
    return r[0], r[1]


def views(qb, kvb, N, T, H):
    q = qb.view(N, H, 192).permute(1, 0, 2).unsqueeze(0)
    k = kvb[: T * H * 192].view(T, H, 192).permute(1, 0, 2).unsqueeze(0)
    v = kvb[T * H * 192:].view(T, H, 128).permute(1, 0, 2).unsqueeze(0)
    return q, k, v


def prefill_single(q, k, v, P):
    from torch.nn.attention import sdpa_kernel, SDPBackend
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=SCALE)


def prefill_split(q, k, v, P):
    if P == 0:
        return prefill_single(q, k, v, 0)
    o1, l1 = cudnn_attn(q, k[:, :, :P], v[:, :, :P], False)
    o2, l2 = cudnn_attn(q, k[:, :, P:], v[:, :, P:], True)
    return merge_lse(o1, l1, o2, l2)


def merge_lse(o1, l1, o2, l2):
    """Two attention outputs over disjoint key sets, merged by their log-sum-exps (l: one per row)."""
    l1 = l1.reshape(o1.shape[:-1]).float()
    l2 = l2.reshape(o2.shape[:-1]).float()
    m = torch.maximum(l1, l2)
    w1 = torch.exp(l1 - m).unsqueeze(-1)
    w2 = torch.exp(l2 - m).unsqueeze(-1)
    return ((o1.float() * w1 + o2.float() * w2) / (w1 + w2)).to(torch.bfloat16)


def flash_attn(q, k, v, causal):
    r = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=SCALE)
    return r[0], r[1]


def pad_v(v):
    """[1, H, T, 128] -> [1, H, T, 192] zero-padded (the flash backend needs d_v == d_qk)."""
    vp = torch.zeros(v.shape[0], v.shape[1], v.shape[2], 192, device=v.device, dtype=v.dtype)
    vp[..., :128] = v
    return vp


def flash_single(q, k, vp, P):
    from torch.nn.attention import sdpa_kernel, SDPBackend
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, vp, is_causal=True, scale=SCALE)[..., :128]


def flash_split(q, k, vp, P):
    if P == 0:
        return flash_single(q, k, vp, 0)
    o1, l1 = flash_attn(q, k[:, :, :P], vp[:, :, :P], False)
    o2, l2 = flash_attn(q, k[:, :, P:], vp[:, :, P:], True)
    return merge_lse(o1[..., :128], l1, o2[..., :128], l2)


def ref_prefill(q, k, v, P):
    qf, kf, vf = q.double(), k.double(), v.double()
    N, T = q.shape[2], k.shape[2]
    s = torch.einsum("bhnd,bhtd->bhnt", qf, kf) * SCALE
    mask = torch.arange(T, device=q.device)[None, :] <= (torch.arange(N, device=q.device)[:, None] + P)
    s = s.masked_fill(~mask, float("-inf"))
    return torch.einsum("bhnt,bhtd->bhnd", torch.softmax(s, -1), vf)


def rel(a, b):
    return ((a.double() - b).norm() / b.norm()).item()


def bench_prefill(args, gi, commit, out):
    torch.manual_seed(1)
    # correctness of both library paths against a float64 reference, bottom-right causal mask
    checks = {}
    for (N, P, H) in [(200, 0, 4), (128, 300, 4), (256, 1024, 2)]:
        T = N + P
        qb = torch.empty(N * H * 192, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
        kvb = torch.empty(T * H * 320, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
        q, k, v = views(qb, kvb, N, T, H)
        ref = ref_prefill(q, k, v, P)
        e1 = rel(prefill_single(q, k, v, P), ref)
        e2 = rel(prefill_split(q, k, v, P), ref)
        checks[f"N{N}_P{P}_H{H}"] = {"single_call": e1, "split": e2}
        print(f"check N={N} P={P} H={H}: single-call rel err {e1:.2e}, split {e2:.2e}", flush=True)
    single_ok = all(c["single_call"] < 1e-2 for c in checks.values())
    split_ok = all(c["split"] < 1e-2 for c in checks.values())
    print(f"cuDNN causal flag bottom-right with a prefix: {single_ok}; split path correct: {split_ok}", flush=True)
    fn = prefill_single if single_ok else prefill_split
    variant = "torch_sdpa_cudnn" if single_ok else "torch_sdpa_cudnn_split"
    ffn = None
    if "flash" in args.prefill_backends:
        fchecks = {}
        for (N, P, H) in [(200, 0, 4), (128, 300, 4), (256, 1024, 2)]:
            T = N + P
            qb = torch.empty(N * H * 192, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
            kvb = torch.empty(T * H * 320, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
            q, k, v = views(qb, kvb, N, T, H)
            ref = ref_prefill(q, k, v, P)
            e1 = e2 = float("inf")
            try:  # PyTorch's flash backend refuses is_causal with seqlen_q != seqlen_k (P > 0)
                e1 = rel(flash_single(q, k, pad_v(v), P), ref)
            except Exception as e:
                print(f"flash single call unavailable: {str(e)[:120]}", flush=True)
            try:
                e2 = rel(flash_split(q, k, pad_v(v), P), ref)
            except Exception as e:
                print(f"flash split unavailable: {str(e)[:200]}", flush=True)
            fchecks[f"N{N}_P{P}_H{H}"] = {"single_call": e1, "split": e2}
            print(f"flash check N={N} P={P} H={H}: single-call rel err {e1:.2e}, split {e2:.2e}", flush=True)
        f_single = all(c["single_call"] < 1e-2 for c in fchecks.values())
        f_split = all(c["split"] < 1e-2 for c in fchecks.values())
        print(f"flash causal flag bottom-right with a prefix: {f_single}; split path correct: {f_split}", flush=True)
        if f_single or f_split:
            ffn = flash_single if f_single else flash_split
            fvariant = "torch_sdpa_flash_padv" if f_single else "torch_sdpa_flash_padv_split"
        checks["flash"] = fchecks
    tab = Table("mla_prefill", "kimi-k3",
                "K3 MLA prefill attention core in MHA mode (d_qk 192, d_v 128), causal chunk of N over a prefix of P, "
                "through PyTorch's cuDNN fused attention (library reference beside servesim's mla_prefill; see "
                "kernels/attention/torch_ref.py); variant torch_sdpa_cudnn_split = two cuDNN calls merged by LSE",
                "2*H*N*(P + (N+1)/2)*(192+128)", "2*(N*H*192 + (P+N)*H*(192+128) + N*H*128)", gi, commit)
    tab.j["library_checks"] = checks
    pts = []
    for H in args.heads:
        for N in grid(256, 16384):
            for Pf in [0, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576]:
                fl = 2.0 * H * N * (Pf + (N + 1) / 2.0) * 320
                if fl <= 6e13 and (Pf + N) * H * 320 * 2 <= 40e9:
                    pts.append((N, Pf, H))
    if args.quick:
        pts = [p for p in pts if (p[0], p[1]) in {(4096, 0), (8192, 0), (8192, 16384), (2048, 65536), (16384, 0)}]
    if args.points:
        pts = [tuple(int(x) for x in t.split(":")) for t in args.points.split(",")]
    if args.skip_existing and os.path.exists(args.skip_existing):
        with open(args.skip_existing) as f:
            have = {(r["shape"]["chunk"], r["shape"]["prefix"], r["shape"]["heads"]) for r in json.load(f)["rows"]}
        n0 = len(pts)
        pts = [p for p in pts if p not in have]
        print(f"--skip-existing: {n0 - len(pts)} points measured before, {len(pts)} to run", flush=True)
    pts.sort(key=lambda p: p[2] * p[0] * (p[1] + p[0] / 2))
    end = time.time() + args.budget
    done = skipped = 0
    last = time.time()
    for (N, Pf, H) in pts:
        if time.time() > end:
            skipped += 1
            continue
        T = Pf + N
        fl = 2.0 * H * N * (Pf + (N + 1) / 2.0) * 320
        nb = 2.0 * (N * H * 192 + T * H * 320 + N * H * 128)
        try:
            ns = nsets(nb)
            sets = []
            for _ in range(ns):
                qb = torch.empty(N * H * 192, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
                kvb = torch.empty(T * H * 320, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
                sets.append(views(qb, kvb, N, T, H))
            if "cudnn" in args.prefill_backends:
                t = time_fn(lambda i: fn(*sets[i % ns], Pf), ns)
                tab.add(variant, {"chunk": N, "prefix": Pf, "heads": H, "d_qk": 192, "d_v": 128},
                        {"qkv": "bf16", "out": "bf16"}, t, fl, nb)
            if ffn is not None:
                fsets = [(q_, k_, pad_v(v_)) for (q_, k_, v_) in sets]
                t = time_fn(lambda i: ffn(*fsets[i % ns], Pf), ns)
                tab.add(fvariant, {"chunk": N, "prefix": Pf, "heads": H, "d_qk": 192, "d_v": 128},
                        {"qkv": "bf16", "out": "bf16"}, t, fl, nb)
                del fsets
            done += 1
            del sets
        except Exception as e:
            print(f"mla_prefill N={N} P={Pf} H={H}: {str(e)[:200]}", flush=True)
            torch.cuda.empty_cache()
        if time.time() - last > 10:
            tab.write(os.path.join(out, "mla_prefill_torch.json"))
            last = time.time()
    tab.j["skipped_points"] = skipped
    tab.write(os.path.join(out, "mla_prefill_torch.json"))
    print(f"mla_prefill torch: {done} points, {skipped} skipped", flush=True)
    for r in tab.j["rows"]:
        s = r["shape"]
        if args.points or (s["heads"] == 96 and (s["chunk"], s["prefix"]) in {(8192, 0), (16384, 0), (8192, 16384), (4096, 0)}):
            print(f"  torch {r['variant']} H={s['heads']} N={s['chunk']} P={s['prefix']}: {r['us_median']:.1f} us "
                  f"{r['tflops']:.1f} TF/s", flush=True)


def bench_absorb(args, gi, commit, out):
    tab = Table("dense_proj_k3_mla", "kimi-k3",
                "K3 MLA absorption GEMMs through torch.bmm (library reference beside servesim's cuBLASLt rows): "
                "w_uk_absorb q_nope[M,h,0:128] @ W[h,128,512], w_uv o_lat[M,h,0:512] @ W[h,512,128], h = 96",
                "2*M*N*K*batch", "2*(M*K + K*N + M*N)*batch", gi, commit)
    H = 96
    Ms = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
    if args.quick:
        Ms = [1, 64, 4096]
    for gname, N, K, ld_in in [("w_uk_absorb", 512, 128, 192), ("w_uv", 128, 512, 512)]:
        for M in Ms:
            nb = 2.0 * (M * K + K * N + M * N) * H
            ns = nsets(nb)
            sets = []
            for _ in range(ns):
                x = torch.empty(M * H * ld_in, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
                w = torch.empty(H, K, N, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
                sets.append((x.view(M, H, ld_in)[:, :, :K].transpose(0, 1), w))
            t = time_fn(lambda i: torch.bmm(*sets[i % ns]), ns, 0.1)
            tab.add(gname + "/torch_bmm", {"K": K, "M": M, "N": N, "batch": H, "gemm": gname},
                    {"in": "bf16", "out": "bf16"}, t, 2.0 * M * N * K * H, nb)
            del sets
    tab.write(os.path.join(out, "dense_proj_k3_mla_torch.json"))
    print(f"absorb torch.bmm: {len(tab.j['rows'])} rows", flush=True)


# ------------------------------------------------------------------------------------------------
# V4 indexer logits and top-k (issue 12): library kernels at the decode shapes of csa_indexer /
# csa_topk (B queries, each over its own L/4 keys / logits).
def v4_decode_points(args):
    Bs = [32, 128, 512] if not args.quick else [32, 512]
    Ls = [8192, 32768, 131072, 524288, 1048576] if not args.quick else [8192, 131072]
    return [(B, L) for L in Ls for B in Bs if B * L // 4 <= 64 * 1024 * 1024]


def bench_v4_indexer(args, gi, commit, out):
    tab = Table("csa_indexer", "deepseek-v4",
                "library references beside servesim's indexer logits (decode: B queries, each over its own L/4 keys of "
                "128): torch_bmm_bf16 = torch.bmm(keys[B,n,128] bf16, q^T[B,128,64]) -> [B,n,64] bf16 (the head GEMM "
                "alone, BF16 operands); torch_scaled_mm_fp8 = torch._scaled_mm(keys[B*n,128] e4m3, q[64,128]^T e4m3, "
                "tensor scales) -> [B*n,64] bf16 (one q for all keys: the FP8 GEMM of the same key bytes, no ReLU / "
                "weighted head sum)", "2*64*128*B*n", "bytes of the library call's operands and output", gi, commit)
    t_end = time.time() + args.budget * 0.5
    for B, L in v4_decode_points(args):
        if time.time() > t_end:
            break
        n = L // 4
        shape = {"batch": B, "ctx": L, "keys_per_query": n, "heads": 64, "dim": 128}
        fl = 2.0 * 64 * 128 * B * n
        try:
            nb = B * n * 128 * 2 + B * 64 * 128 * 2 + B * n * 64 * 2
            ns = nsets(nb, 4)
            sets = [(torch.empty(B, n, 128, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1),
                     torch.empty(B, 64, 128, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1).transpose(1, 2))
                    for _ in range(ns)]
            t = time_fn(lambda i: torch.bmm(*sets[i % ns]), ns, 0.1)
            tab.add("torch_bmm_bf16", shape, {"keys": "bf16", "q": "bf16", "out": "bf16"}, t, fl, nb)
            del sets
            nb = B * n * 128 + 64 * 128 + B * n * 64 * 2
            ns = nsets(nb, 4)
            one = torch.tensor(1.0, device="cuda")
            sets = []
            for _ in range(ns):
                k = torch.empty(B * n, 128, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1).to(torch.float8_e4m3fn)
                q = torch.empty(64, 128, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1).to(torch.float8_e4m3fn)
                sets.append((k, q.t()))
            t = time_fn(lambda i: torch._scaled_mm(sets[i % ns][0], sets[i % ns][1], scale_a=one, scale_b=one,
                                                   out_dtype=torch.bfloat16), ns, 0.1)
            tab.add("torch_scaled_mm_fp8", shape, {"keys": "fp8_e4m3", "q": "fp8_e4m3", "out": "bf16"}, t, fl, nb)
            del sets
        except Exception as e:
            print(f"indexer torch B={B} L={L}: {str(e)[:200]}", flush=True)
        torch.cuda.empty_cache()
    tab.write(os.path.join(out, "csa_indexer_torch.json"))
    print(f"csa_indexer torch: {len(tab.j['rows'])} rows", flush=True)


def bench_v4_topk(args, gi, commit, out):
    tab = Table("csa_topk", "deepseek-v4",
                "library reference beside servesim's top-k: torch.topk(logits[B, L/4] fp32, k, dim=-1, sorted=False) "
                "(values and int64 indices out)", "0", "sum of row lengths*4 + rows*k*(4+8)", gi, commit)
    t_end = time.time() + args.budget * 0.5
    for k in (512, 1024):
        for B, L in v4_decode_points(args):
            if time.time() > t_end:
                break
            n = L // 4
            nb = B * n * 4 + B * k * 12
            ns = nsets(nb, 8)
            try:
                sets = [torch.empty(B, n, device="cuda", dtype=torch.float32).uniform_(-10, 10) for _ in range(ns)]
                t = time_fn(lambda i: torch.topk(sets[i % ns], k, dim=-1, sorted=False), ns, 0.1)
                tab.add("torch_topk", {"batch": B, "ctx": L, "row_len": n, "topk": k}, {"logits": "fp32", "idx": "int64"},
                        t, 0.0, nb)
                del sets
            except Exception as e:
                print(f"topk torch B={B} L={L}: {str(e)[:200]}", flush=True)
            torch.cuda.empty_cache()
    tab.write(os.path.join(out, "csa_topk_torch.json"))
    print(f"csa_topk torch: {len(tab.j['rows'])} rows", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=120)
    ap.add_argument("--ops", default="mla_prefill,absorb")
    ap.add_argument("--heads", default="96,48,24,12")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-existing", default="", help="mla_prefill: a table whose points are not run again")
    ap.add_argument("--points", default="", help="mla_prefill: only these N:P:H points (comma-separated)")
    ap.add_argument("--prefill-backends", default="cudnn", help="mla_prefill: cudnn and/or flash (SDPA flash backend, V "
                    "zero-padded to 192 columns since it needs d_v == d_qk; its FLOPs are counted as the unpadded op's)")
    args = ap.parse_args()
    args.heads = [int(x) for x in args.heads.split(",")]
    os.makedirs(args.out, exist_ok=True)
    commit = os.environ.get("SERVESIM_COMMIT", "unknown")
    gi = gpu_info()
    print(f"torch {torch.__version__} cudnn {torch.backends.cudnn.version()} on {gi['name']}", flush=True)
    ops = args.ops.split(",")
    if "absorb" in ops:
        bench_absorb(args, gi, commit, args.out)
    if "mla_prefill" in ops:
        bench_prefill(args, gi, commit, args.out)
    if "v4_indexer" in ops:
        bench_v4_indexer(args, gi, commit, args.out)
    if "v4_topk" in ops:
        bench_v4_topk(args, gi, commit, args.out)


if __name__ == "__main__":
    main()
