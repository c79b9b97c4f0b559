"""The PyTorch side of bench/ddp: torchvision's ResNet-18 under PyTorch's own
DistributedDataParallel (gloo), timed the same way as ddp_step.cpp.

  torchrun --nproc_per_node 2 bench/ddp/ddp_step.py --mode ddp|nosync [--batch 16]
      [--image 64] [--steps 20] [--warmup 5] [--threads 1] [--bucket-mb 25]
      [--broadcast-buffers 1]

A step is zero_grad + forward + backward (+ DDP's gradient all-reduce;
--mode nosync runs the same DDP model inside no_sync()) + SGD step, on a
synthetic batch that differs per rank. Rank 0 prints one JSON line: the
slowest rank's mean step time over the timed steps and the median of the
per-step slowest-rank times.
"""
import argparse
import contextlib
import json
import time

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("ddp", "nosync"), default="ddp")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--image", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bucket-mb", type=float, default=25)
    parser.add_argument("--broadcast-buffers", type=int, default=1)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torchvision.models.resnet18(num_classes=10),
                                    bucket_cap_mb=args.bucket_mb,
                                    broadcast_buffers=bool(args.broadcast_buffers))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    torch.manual_seed(1 + rank)
    images = torch.randn(args.batch, 3, args.image, args.image)
    labels = torch.randint(10, (args.batch,))
    loss_fn = torch.nn.CrossEntropyLoss()

    step_ms = []
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            dist.barrier()
        start = time.perf_counter()
        optimizer.zero_grad()
        with model.no_sync() if args.mode == "nosync" else contextlib.nullcontext():
            loss_fn(model(images), labels).backward()
        optimizer.step()
        if step >= args.warmup:
            step_ms.append((time.perf_counter() - start) * 1000)
    slowest = torch.tensor(step_ms, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    per_step = sorted(slowest.tolist())
    if rank == 0:
        print(json.dumps({"impl": "pytorch", "mode": args.mode, "ranks": dist.get_world_size(),
                          "mean_ms": round(sum(per_step) / len(per_step), 3),
                          "median_ms": round(per_step[len(per_step) // 2], 3),
                          "steps": len(per_step)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
