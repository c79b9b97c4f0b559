"""The Slurm consistency rules of PyTorch-Ignite's idist (ignite/distributed/
comp_models/native.py: _setup_env_in_slurm, _setup_ddp_vars_from_slurm_env,
_identify_local_rank, v0.6.0), replayed against this worker's environment.
Ignite needs the Slurm variables below; when RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT are set too, then on several nodes (per
SLURM_JOB_NUM_NODES) RANK == SLURM_PROCID, LOCAL_RANK == SLURM_LOCALID and
WORLD_SIZE == SLURM_NTASKS, and on one node each is at least its Slurm
counterpart; the local rank Ignite then uses is SLURM_LOCALID. Exits 1 naming
the rule that fails, else prints what it checked. Needs no torch."""
import os
import sys

env = os.environ
for name in ["SLURM_JOB_ID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS",
             "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES"]:
    if name not in env:
        sys.exit(f"idist: SLURM distributed configuration is missing '{name}'")
pairs = [("RANK", "SLURM_PROCID"), ("LOCAL_RANK", "SLURM_LOCALID"), ("WORLD_SIZE", "SLURM_NTASKS")]
torch_vars = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]
if not all(name in env for name in torch_vars):
    sys.exit(f"idist: expected every one of {torch_vars} from the launcher")
several_nodes = int(env["SLURM_JOB_NUM_NODES"]) > 1
for torch_name, slurm_name in pairs:
    torch_value, slurm_value = int(env[torch_name]), int(env[slurm_name])
    if several_nodes and torch_value != slurm_value:
        sys.exit(f"idist: {torch_name}={torch_value} but {slurm_name}={slurm_value}")
    if not several_nodes and torch_value < slurm_value:
        sys.exit(f"idist: {torch_name}={torch_value} < {slurm_name}={slurm_value}")
local_rank = int(env["SLURM_LOCALID"])  # what idist takes as the local rank
if local_rank != int(env["LOCAL_RANK"]):
    sys.exit(f"idist: its local rank SLURM_LOCALID={local_rank} is not LOCAL_RANK={env['LOCAL_RANK']}")
print(f"idist rules hold: rank {env['RANK']}/{env['WORLD_SIZE']} local {local_rank} "
      f"on {env['SLURM_JOB_NUM_NODES']} nodes", flush=True)
