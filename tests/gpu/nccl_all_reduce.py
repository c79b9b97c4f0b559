"""One rank of a GPU tutorial's script: the GPU of LOCAL_RANK, NCCL, one all_reduce.

Prints the rank, its CUDA device (index, name, PCI bus id) and the all_reduce's
result, which must be 1 + 2 + ... + WORLD_SIZE.
"""
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
rank, size = dist.get_rank(), dist.get_world_size()
x = torch.full((1024,), float(rank + 1), device="cuda")
dist.all_reduce(x)
device = torch.cuda.current_device()
props = torch.cuda.get_device_properties(device)
bus = getattr(props, "pci_bus_id", "?")
want = size * (size + 1) / 2
print(f"rank {rank}/{size}: cuda:{device} {props.name} bus {bus} "
      f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')} "
      f"all_reduce {x[0].item():g} (want {want:g})", flush=True)
dist.destroy_process_group()
assert x[0].item() == want
