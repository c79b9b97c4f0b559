"""reduction: every process contributes a tensor of ones; all_reduce sums
them, and every process prints the world size.

    cohort run -n 2 examples/python/reduction.py
"""
import socket

import torch
import torch.distributed as dist

from common import init, master, parse_args

args = parse_args(__doc__)
device = init(args)
data = torch.ones(1, device=device)
dist.all_reduce(data, op=dist.ReduceOp.SUM)
print(f"[{master()}] [{socket.gethostname()}:{args.backend}] process "
      f"{dist.get_rank()}/{dist.get_world_size()} has data {data.cpu()} "
      f"(local rank {args.local_rank})", flush=True)
dist.destroy_process_group()
