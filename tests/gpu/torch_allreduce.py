#!/usr/bin/env python3
"""The reference for tests/gpu/e2e.sh: PyTorch's torch.distributed all_reduce with the NCCL
backend, in the same layout as preflight (one process per pod, one GPU each) and on the same
message sizes, timed the way preflight times its own: CUDA events around `iters` all-reduces
after `warmup` ones, mean time per iteration; algbw = bytes / time, busbw = algbw x 2(n-1)/n
(nccl-tests). --bytes takes one size or several, comma-separated; rank 0 prints one JSON line
per size. Exits 3 when torch cannot be imported."""
import argparse
import json
import sys

try:
    import torch
    import torch.distributed as dist
except Exception as e:  # noqa: BLE001 - any import failure means "no torch here"
    print(json.dumps({"error": "torch not importable: %s" % e}))
    sys.exit(3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--bytes", default=str(64 << 20))
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method="tcp://%s:%d" % (a.master, a.port),
                            rank=a.rank, world_size=a.world_size)
    n = a.world_size
    bad = 0
    for size in [int(b) for b in a.bytes.split(",")]:
        bad += run_size(a, n, max(1, size // 4))
    dist.destroy_process_group()
    return 1 if bad else 0


def run_size(a, n, count):
    # exact small integers, so the sum is exact in float32 and can be checked
    x = (torch.arange(count, device="cuda", dtype=torch.float32) % 61) + (a.rank % 7) + 1
    want_add = sum(r % 7 for r in range(n))
    for _ in range(a.warmup):
        y = x.clone()
        dist.all_reduce(y)
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    bufs = [x.clone() for _ in range(2)]
    start.record()
    for i in range(a.iters):
        dist.all_reduce(bufs[i % 2])
    stop.record()
    torch.cuda.synchronize()
    sec = start.elapsed_time(stop) / 1000.0 / a.iters
    # correctness of one more all-reduce
    y = x.clone()
    dist.all_reduce(y)
    want = n * ((torch.arange(count, device="cuda", dtype=torch.float32) % 61) + 1) + want_add
    wrong = int((y != want).sum().item())
    # mean time over ranks, as preflight averages over every GPU
    t = torch.tensor([sec], device="cuda", dtype=torch.float64)
    dist.all_reduce(t)
    sec = t.item() / n
    algbw = count * 4 / 1e9 / sec
    if a.rank == 0:
        print(json.dumps({
            "runner": "torch.distributed", "torch": torch.__version__,
            "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()),
            "ranks": n, "bytes": count * 4, "timeUs": round(sec * 1e6, 1),
            "algbwGBps": round(algbw, 2), "busbwGBps": round(algbw * 2 * (n - 1) / n, 2),
            "correct": wrong == 0,
        }))
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
