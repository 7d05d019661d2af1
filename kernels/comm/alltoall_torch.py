#!/usr/bin/env python3
"""NVLink all-to-all through PyTorch's torch.distributed.all_to_all_single (NCCL backend), one
process per GPU, on the GPUs of one host. Appends rows (variant "torch_all_to_all_single") to
<out>/comm_nvlink_alltoall.json in the servesim.kernel-table/1 schema of kernels/common/bench.cuh
(creates the file with the same top-level fields if bench_comm did not).

Per message size S (bytes per peer): every rank sends S to each peer (itself included); time per
call = max over ranks of the CUDA-event median; bytes = S*(world-1) (what one rank sends over
NVLink), tbps = bytes / time. Verifies the received data once before timing.
Usage: python3 alltoall_torch.py --out DIR [--max-bytes B] [--deadline-s S]
NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 are forced (KINDS.md).
"""
import argparse
import json
import os
import subprocess
import sys
import time

os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def grid(lo, hi):
    v, p = [], 1
    while p <= hi:
        if p >= lo:
            v.append(p)
        m = p * 3 // 2
        if p < m <= hi and m >= lo and m % 16 == 0:
            v.append(m)
        p *= 2
    return sorted(v)


def smi(q):
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except Exception:  # noqa: BLE001
        return ""


def worker(rank, world, args, q):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29533"
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    t0 = time.time()
    maxb = args.max_bytes
    send = torch.empty(world * maxb, dtype=torch.uint8, device="cuda")
    recv = torch.empty_like(send)
    # correctness at 1 MiB per peer: chunk p of rank r's send = (r*7 + p*3 + i) % 251
    S = 1 << 20
    idx = torch.arange(S, device="cuda", dtype=torch.int64)
    for p in range(world):
        send[p * S:(p + 1) * S] = ((rank * 7 + p * 3 + idx) % 251).to(torch.uint8)
    dist.all_to_all_single(recv[:world * S], send[:world * S])
    torch.cuda.synchronize()
    ok = True
    for p in range(world):
        want = ((p * 7 + rank * 3 + idx) % 251).to(torch.uint8)
        ok = ok and bool(torch.equal(recv[p * S:(p + 1) * S], want))
    rows = []
    sizes = [1024, 1 << 20, 64 << 20] if args.quick else grid(1024, maxb)
    for S in sizes:
        stop = torch.tensor([1 if time.time() - t0 > args.deadline_s else 0], device="cuda")
        dist.all_reduce(stop)
        if stop.item():
            break
        s, r = send[:world * S], recv[:world * S]
        for _ in range(3):
            dist.all_to_all_single(r, s)
        torch.cuda.synchronize()
        # the same number of runs on every rank (a rank-local stopping rule would mismatch collectives)
        nruns = 50 if S <= (1 << 20) else (20 if S <= (64 << 20) else 10)
        times, tot = [], 0.0
        for _ in range(nruns):
            dist.barrier()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            dist.all_to_all_single(r, s)
            b.record()
            b.synchronize()
            ms = a.elapsed_time(b)
            times.append(ms * 1000.0)
            tot += ms
        tt = torch.tensor(times, device="cuda", dtype=torch.float64)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)  # per run, the slower rank
        ts = sorted(tt.tolist())
        qf = lambda f: ts[round(f * (len(ts) - 1))]  # noqa: E731
        rows.append((S, qf(0.5), qf(0.1), qf(0.9), len(ts)))
    if rank == 0:
        q.put((ok, rows))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-bytes", type=int, default=1 << 30)
    ap.add_argument("--deadline-s", type=float, default=120.0)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    world = torch.cuda.device_count()
    if world < 2:
        print("alltoall_torch: fewer than 2 GPUs, nothing to do")
        return 0
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, args, q)) for r in range(world)]
    for p in procs:
        p.start()
    ok, rows = q.get(timeout=args.deadline_s + 300)
    for p in procs:
        p.join()
    print(f"check torch all_to_all_single 1 MiB per peer: {'PASS' if ok else 'FAIL'}")
    path = os.path.join(args.out, "comm_nvlink_alltoall.json")
    if os.path.exists(path):
        with open(path) as f:
            tab = json.load(f)
    else:
        props = torch.cuda.get_device_properties(0)
        tab = {"schema": "servesim.kernel-table/1", "op": "comm_nvlink_alltoall", "model": "any",
               "description": "All-to-all between the GPUs of one host over NVLink",
               "flop_formula": "0", "byte_formula": "bytes_per_peer*(world-1)",
               "gpu": {"name": props.name, "driver": smi("driver_version") or "unknown",
                       "cuda_runtime": int(float(torch.version.cuda) * 1000) if torch.version.cuda else 0,
                       "sm_count": props.multi_processor_count, "l2_bytes": props.L2_cache_size,
                       "hbm_bytes": props.total_memory,
                       "sm_clock_max_mhz": int(smi("clocks.max.sm") or 0),
                       "mem_clock_max_mhz": int(smi("clocks.max.mem") or 0)},
               "commit": os.environ.get("SERVESIM_COMMIT", "unknown"),
               "method": {"timer": "torch.cuda.Event around each call",
                          "statistic": "median, p10, p90 over timed runs after warm-up",
                          "rotation": "none (buffers larger than L2 from 64 MiB up)"},
               "rows": []}
    if not ok:
        print("torch all-to-all data mismatch: rows not written")
        return 1
    for S, med, p10, p90, n in rows:
        b = float(S * (world - 1))
        tab["rows"].append({"variant": "torch_all_to_all_single",
                            "shape": {"world": world, "bytes_per_peer": S, "devices": list(range(world))},
                            "dtypes": {"data": "bytes"}, "us_median": med, "us_p10": p10, "us_p90": p90, "runs": n,
                            "flops": 0.0, "bytes": b, "tflops": 0.0, "tbps": b / (med * 1e-6) / 1e12 if med > 0 else 0.0})
        if S in (64 << 20, args.max_bytes):
            print(f"alltoall torch {S >> 20} MiB/peer: {med:.1f} us, {S / med / 1e3:.1f} GB/s per direction")
    with open(path, "w") as f:
        json.dump(tab, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
