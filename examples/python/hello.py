"""hello: every process joins the group and says hello, as in the PyTorch
distributed tutorial.

    cohort run -n 4 examples/python/hello.py
    torchrun --standalone --nproc_per_node 4 examples/python/hello.py
"""
import socket

import torch.distributed as dist

from common import init, master, parse_args

args = parse_args(__doc__)
init(args)
print(f"[{master()}] hello from [{socket.gethostname()}:{args.backend}] process "
      f"{dist.get_rank()}/{dist.get_world_size()}", flush=True)
dist.barrier()
dist.destroy_process_group()
