"""reduction, as mpirun tutorials write it: the rank, world size and local
rank come from Open MPI's variables only (OMPI_COMM_WORLD_RANK,
OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK), the master from
MASTER_ADDR and MASTER_PORT, which `mpirun ... cohort run` provides.

    mpirun -np 4 cohort run examples/python/reduction_mpi.py
"""
import os
import socket

import torch
import torch.distributed as dist

rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
world_size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
local_rank = int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"])
os.environ["RANK"] = str(rank)
os.environ["WORLD_SIZE"] = str(world_size)
dist.init_process_group("gloo", init_method="env://")
data = torch.ones(1)
dist.all_reduce(data, op=dist.ReduceOp.SUM)
print(f"[{socket.gethostname()}:ompi] process {rank}/{world_size} has data {data} "
      f"(local rank {local_rank})", flush=True)
dist.destroy_process_group()
