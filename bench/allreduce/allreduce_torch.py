"""PyTorch's gloo all_reduce, timed like `cohort bench allreduce`: float32 sum
in place; per size a warm-up, then REPS reps of ITERS back-to-back operations;
a rep's time is the slowest rank's mean, and the median rep is reported.
One JSON line per size on rank 0's stdout. Run under any launcher that sets
the torchrun variables (compare_allreduce uses `cohort run`, which starts
workers in milliseconds; the operation timed is PyTorch's all the same).

  allreduce_torch.py SIZES_BYTES_COMMA_SEPARATED ITERS REPS WARMUP
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
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    for size in sizes:
        data = torch.ones(size // 4, dtype=torch.float32)
        n = max(3, min(iters, (1 << 30) // size))
        for _ in range(warmup):
            dist.all_reduce(data)
        times = []
        for _ in range(reps):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(n):
                dist.all_reduce(data)
            mean = torch.tensor([(time.perf_counter() - start) / n], dtype=torch.float64)
            dist.all_reduce(mean, op=dist.ReduceOp.MAX)
            times.append(mean.item())
        if rank == 0:
            print(json.dumps({"bytes": size, "time_us": statistics.median(times) * 1e6}),
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
