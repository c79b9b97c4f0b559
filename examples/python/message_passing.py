"""message_passing: point to point. Each process sends its rank to the next
one round a ring and receives from the previous one (blocking send/recv),
then rank 0 and the last rank play ping-pong with isend/irecv.

    cohort run -n 3 examples/python/message_passing.py
"""
import torch
import torch.distributed as dist

from common import init, parse_args

args = parse_args(__doc__)
device = init(args)
rank, world = dist.get_rank(), dist.get_world_size()

# The ring: even ranks send first, odd ranks receive first, so no one waits
# on a send the other side is not receiving (gloo's send waits for the recv).
outgoing = torch.tensor([float(rank)], device=device)
incoming = torch.zeros(1, device=device)
if world > 1:
    if rank % 2 == 0:
        dist.send(outgoing, (rank + 1) % world)
        dist.recv(incoming, (rank - 1) % world)
    else:
        dist.recv(incoming, (rank - 1) % world)
        dist.send(outgoing, (rank + 1) % world)
print(f"process {rank}/{world} received {int(incoming.item())} from "
      f"{(rank - 1) % world}", flush=True)

# Ping-pong between rank 0 and the last rank, non-blocking.
last = world - 1
if world > 1 and rank in (0, last):
    ball = torch.tensor([1.0 if rank == 0 else 0.0], device=device)
    for _ in range(3):
        if rank == 0:
            dist.isend(ball, last).wait()
            dist.irecv(ball, last).wait()
        else:
            dist.irecv(ball, 0).wait()
            ball += 1
            dist.isend(ball, 0).wait()
    if rank == 0:
        print(f"process 0/{world} ping-pong with {last}: ball is {int(ball.item())} after 3 "
              f"round trips", flush=True)
dist.barrier()
dist.destroy_process_group()
