"""PyTorch reference timings for the V4 CSA/HCA sparse attention core (issue 12, seventh session).

No fused library kernel for this op exists on the device machine (FlashMLA is not installed; SDPA's
flash / cuDNN backends take head dims <= 256, and d = 512 here). What is timed, per point:
  torch_gather_dequant_bmm: rows = pool[indices] (FP8 584-B rows), E4M3 x UE8M0 -> BF16 + RoPE part,
    S = Q K^T (bmm), softmax (fp32), O = P V (bmm), i.e. the op as a PyTorch program;
  torch_bmm_core: the two bmm + softmax only, over already dequantised BF16 rows (a lower bound for
    any PyTorch composition). No attention sink (it changes only the normaliser).
FLOPs 2*H*n*1024 per query as bench_attn's tables. Times: CUDA events, median of reps after warm-up.
Usage: python3 torch_v4attn.py --out DIR [--points H:B:n,...]
"""
import argparse, json, os, statistics, time
import torch


def dequant(rows):  # rows [..., 584] uint8 -> [..., 512] bf16
    nope = rows[..., :448].contiguous().view(torch.float8_e4m3fn).to(torch.float32)
    sc = torch.exp2(rows[..., 576:583].to(torch.float32) - 127.0)
    nope = (nope.unflatten(-1, (7, 64)) * sc.unsqueeze(-1)).flatten(-2)
    rope = rows[..., 448:576].contiguous().view(torch.bfloat16)
    return torch.cat([nope.to(torch.bfloat16), rope], dim=-1)


def time_cuda(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--points", default="128:512:1152,128:128:1152,128:32:1152,64:512:640,64:128:640,128:64:1152")
    args = ap.parse_args()
    dev = torch.device("cuda")
    g = torch.Generator(device=dev); g.manual_seed(1)
    rows_out = []
    for p in args.points.split(","):
        H, B, n = (int(x) for x in p.split(":"))
        pool_rows = B * n
        pool = torch.randint(0, 256, (pool_rows, 584), dtype=torch.uint8, device=dev, generator=g)
        nope = pool[:, :448]
        nope[(nope & 0x7F) == 0x7F] = 0  # no E4M3 NaN
        pool[:, 448:576].view(torch.bfloat16).copy_(torch.rand(pool_rows, 64, device=dev, generator=g).to(torch.bfloat16))
        pool[:, 576:583] = torch.randint(115, 121, (pool_rows, 7), dtype=torch.uint8, device=dev, generator=g)
        idx = torch.randint(0, pool_rows, (B, n), device=dev, generator=g)
        q = (torch.rand(B, H, 512, device=dev, generator=g) * 0.6 - 0.3).to(torch.bfloat16)
        scale = 512 ** -0.5

        def full():
            k = dequant(pool[idx])  # [B, n, 512]
            s = torch.bmm(q, k.transpose(1, 2)).float() * scale
            pr = torch.softmax(s, dim=-1).to(torch.bfloat16)
            return torch.bmm(pr, k)

        kd = dequant(pool[idx])

        def core():
            s = torch.bmm(q, kd.transpose(1, 2)).float() * scale
            pr = torch.softmax(s, dim=-1).to(torch.bfloat16)
            return torch.bmm(pr, kd)

        flops = 2.0 * H * n * 1024 * B
        for name, fn in (("torch_gather_dequant_bmm", full), ("torch_bmm_core", core)):
            us = time_cuda(fn)
            r = {"variant": name, "heads": H, "batch": B, "rows_per_query": n, "us": us,
                 "tflops": flops / us / 1e6, "library": "torch " + torch.__version__}
            rows_out.append(r)
            print(f"  torch {name:26s} H={H:3d} B={B:4d} n={n:5d} {us:10.1f} us {r['tflops']:7.1f} TF/s", flush=True)
        del pool, idx, q, kd
        torch.cuda.empty_cache()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "torch_v4attn.json"), "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows_out}, f, indent=1)


if __name__ == "__main__":
    main()
