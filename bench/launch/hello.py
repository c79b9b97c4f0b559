# The torch counterpart of examples/hello.cpp: join the group, one barrier,
# say hello, leave. Run by torchrun / torch.distributed.launch in bench/launch.
import os
import socket

import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
print(f"[{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}] hello from "
      f"[{socket.gethostname()}:gloo] process {rank}/{world}", flush=True)
dist.barrier()
dist.destroy_process_group()
