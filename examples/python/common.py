"""What every example shares: the --backend option and joining the group the
launcher described (torchrun, cohort run, torch.distributed.launch: RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment)."""
import argparse
import os

import torch
import torch.distributed as dist


def parse_args(description, extra=None):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", default="gloo", choices=["gloo", "nccl", "mpi"],
                        help="collectives backend (default gloo, on CPU; nccl uses the GPU "
                             "LOCAL_RANK)")
    # torch.distributed.launch without --use_env passes this (cohort run --local-rank-arg).
    parser.add_argument("--local_rank", "--local-rank", type=int,
                        default=int(os.environ.get("LOCAL_RANK", "0")))
    if extra:
        extra(parser)
    return parser.parse_args()


def init(args):
    """Joins the group; returns the device this rank computes on."""
    dist.init_process_group(args.backend, init_method="env://")
    if args.backend == "nccl":
        torch.cuda.set_device(args.local_rank)
        return torch.device("cuda", args.local_rank)
    return torch.device("cpu")


def master():
    return "%s:%s" % (os.environ.get("MASTER_ADDR", "?"), os.environ.get("MASTER_PORT", "?"))
