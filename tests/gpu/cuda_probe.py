"""One worker of tests/gpu/check: which GPU it uses, and an NCCL all_reduce
across the workers. Prints one line per rank; exits 1 when the sum is wrong."""
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
# As the tutorials do: set_device(LOCAL_RANK); under --gpus-per-proc each
# worker sees only its own, cuda:0.
torch.cuda.set_device(local_rank % torch.cuda.device_count())
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.full((1,), float(rank + 1), device="cuda")
dist.all_reduce(value)
expected = world * (world + 1) / 2
device = torch.cuda.current_device()
properties = torch.cuda.get_device_properties(device)
bus = "{:04x}:{:02x}:{:02x}".format(getattr(properties, "pci_domain_id", 0),
                                    getattr(properties, "pci_bus_id", 0),
                                    getattr(properties, "pci_device_id", 0))
print(f"rank {rank}/{world} local {local_rank}: cuda:{device} {properties.name} (bus {bus}), "
      f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}, "
      f"GLOO/NCCL_SOCKET_IFNAME={os.environ.get('NCCL_SOCKET_IFNAME', '(unset)')}, "
      f"CPUs {sorted(os.sched_getaffinity(0))[:4]}..., "
      f"all_reduce {value.item()} (expected {expected})", flush=True)
dist.destroy_process_group()
raise SystemExit(0 if value.item() == expected else 1)
