"""An unchanged PyTorch tutorial's start: init_process_group("gloo") from env://, one all_reduce."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
x = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(x)
print(f"rank {dist.get_rank()}/{dist.get_world_size()}: all_reduce {x.item():g}", flush=True)
dist.destroy_process_group()
