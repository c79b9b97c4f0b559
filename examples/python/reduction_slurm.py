"""reduction, as Slurm tutorials write it: the rank, world size and local
rank come from srun's variables only (SLURM_PROCID, SLURM_NTASKS,
SLURM_LOCALID), the master from MASTER_ADDR and MASTER_PORT.

    srun -N2 --ntasks-per-node=2 cohort run examples/python/reduction_slurm.py
    srun -N2 --ntasks-per-node=1 cohort run -n 2 examples/python/reduction_slurm.py
"""
import os
import socket

import torch
import torch.distributed as dist

rank = int(os.environ["SLURM_PROCID"])
world_size = int(os.environ["SLURM_NTASKS"])
local_rank = int(os.environ["SLURM_LOCALID"])
address = f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
dist.init_process_group("gloo", init_method=address, rank=rank, world_size=world_size)
data = torch.ones(1)
dist.all_reduce(data, op=dist.ReduceOp.SUM)
print(f"[{socket.gethostname()}:slurm] process {rank}/{world_size} has data {data} "
      f"(local rank {local_rank})", flush=True)
dist.destroy_process_group()
