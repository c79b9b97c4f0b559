"""PyTorch's gloo all_reduce, timed like `cohort bench allreduce`: float32 sum
in place; per size a warm-up, then REPS reps of ITERS back-to-back operations;
a rep's time is the slowest rank's mean, and the median rep is reported.
One JSON line per size on rank 0's stdout. Run under any launcher that sets
the torchrun variables (compare_allreduce uses `cohort run`, which starts
workers in milliseconds; the operation timed is PyTorch's all the same).

  allreduce_torch.py SIZES_BYTES_COMMA_SEPARATED ITERS REPS WARMUP [OP]

OP: all_reduce (default) or all_gather (sizes as nccl-tests count them: the
output, n slices of size/n; the list form, which gloo supports in every
PyTorch version; gloo has no reduce_scatter).
"""
import json
import statistics
import sys
import time

import torch
import torch.distributed as dist


def main():
    sizes = [int(s) for s in sys.argv[1].split(",")]
    iters, reps, warmup = (int(a) for a in sys.argv[2:5])
    op = sys.argv[5] if len(sys.argv) > 5 else "all_reduce"
    if op not in ("all_reduce", "all_gather"):
        sys.exit(f"allreduce_torch.py: OP is all_reduce or all_gather, not {op!r}")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    for size in sizes:
        if op == "all_reduce":
            data = torch.ones(size // 4, dtype=torch.float32)
            call = lambda: dist.all_reduce(data)  # noqa: E731
        else:
            data = torch.ones(max(1, size // 4 // world), dtype=torch.float32)
            slices = [torch.empty_like(data) for _ in range(world)]
            call = lambda: dist.all_gather(slices, data)  # noqa: E731
        n = max(3, min(iters, (1 << 30) // size))
        for _ in range(warmup):
            call()
        times = []
        for _ in range(reps):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(n):
                call()
            mean = torch.tensor([(time.perf_counter() - start) / n], dtype=torch.float64)
            dist.all_reduce(mean, op=dist.ReduceOp.MAX)
            times.append(mean.item())
        if rank == 0:
            print(json.dumps({"bytes": size, "time_us": statistics.median(times) * 1e6}),
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
