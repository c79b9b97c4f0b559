"""ddp: a small model trained with DistributedDataParallel on synthetic data,
as in the PyTorch DDP tutorial. Each step draws one global batch from a
seeded generator and every rank takes its slice, so N ranks train on exactly
what 1 rank would see with the whole batch: the final parameters match
(tests/python compares them).

    cohort run -n 2 examples/python/ddp.py --steps 5
    cohort run -n 1 examples/python/ddp.py --steps 5 --save one.pt
"""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from common import init, parse_args


def options(parser):
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch", type=int, default=32, help="global batch, split over ranks")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--save", help="rank 0 saves the final parameters here")


args = parse_args(__doc__, options)
device = init(args)
rank, world = dist.get_rank(), dist.get_world_size()
if args.batch % world:
    raise SystemExit(f"--batch {args.batch} does not split over {world} ranks")

torch.manual_seed(1)
target = torch.nn.Linear(16, 1)  # the function to learn, the same on every rank
torch.manual_seed(0)  # the same initial model everywhere (DDP also broadcasts rank 0's)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                            torch.nn.Linear(32, 1)).to(device)
ddp = DistributedDataParallel(model, device_ids=[args.local_rank] if device.type == "cuda" else None)
optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)

share = args.batch // world
for step in range(args.steps):
    data = torch.Generator().manual_seed(1000 + step)
    inputs = torch.randn(args.batch, 16, generator=data)
    with torch.no_grad():
        labels = target(inputs)
    mine = slice(rank * share, (rank + 1) * share)
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(ddp(inputs[mine].to(device)), labels[mine].to(device))
    loss.backward()  # DDP averages the gradients over the ranks here
    optimizer.step()
    reported = loss.detach().clone()
    dist.all_reduce(reported)
    if rank == 0:
        print(f"step {step}: loss {reported.item() / world:.6f}", flush=True)

if rank == 0 and args.save:
    torch.save({name: p.detach().cpu() for name, p in model.named_parameters()}, args.save)
dist.destroy_process_group()
