"""A worker for tests/python/python_test.cpp: joins the group as any torch
script does, all-reduces, and prints what the launcher gave it. Options make
it fail the way users' scripts do."""
import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

parser = argparse.ArgumentParser()
# torch.distributed.launch's, in PyTorch 1.x's and 2.x's spellings.
parser.add_argument("--local_rank", "--local-rank", type=int, default=None)
parser.add_argument("--exit-on-first-attempt", type=int, default=-1, metavar="RANK")
parser.add_argument("--raise-in", type=int, default=-1, metavar="RANK")
parser.add_argument("--record", action="store_true",
                    help="decorate the entry point with torch's @record (TORCHELASTIC_ERROR_FILE)")
args = parser.parse_args()


def main():
    rank = int(os.environ["RANK"])
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "-1"))
    if rank == args.exit_on_first_attempt and restart == 0:
        print(f"rank {rank} exits on attempt 0", file=sys.stderr, flush=True)
        sys.exit(1)
    dist.init_process_group("gloo", init_method="env://")
    total = torch.ones(1)
    dist.all_reduce(total)
    if rank == args.raise_in:
        raise RuntimeError(f"rank {rank} cannot go on: batch 17 has no labels")
    print(f"probe rank {rank}/{dist.get_world_size()} restart {restart} local_rank_arg "
          f"{args.local_rank} sum {int(total.item())}", flush=True)
    dist.destroy_process_group()


(record(main) if args.record else main)()
