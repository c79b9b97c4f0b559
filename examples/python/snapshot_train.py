"""snapshot_train: DDP training that survives restarts, in the shape of the
PyTorch DDP tutorial series' multinode script: rank 0 saves a snapshot
(model and epochs done) after every epoch, and every attempt resumes from
the last one. Under `cohort run --max-restarts N` (or torchrun's) a failed
attempt costs only the epoch it was in.

    cohort run -n 2 --max-restarts 1 examples/python/snapshot_train.py --snapshot /shared/snap.pt
    srun -N4 --ntasks-per-node=1 cohort run -n 2 --max-restarts 1 \\
        examples/python/snapshot_train.py --snapshot /shared/snap.pt

--kill-rank R --kill-at-epoch E makes rank R SIGKILL itself at the start of
epoch E in the first attempt only (TORCHELASTIC_RESTART_COUNT 0): a failure
to restart from. With --kill-agent it SIGKILLs its parent instead (the
cohort run or torchrun agent of its node): a node lost, which a job with
elastic membership (--nnodes MIN:MAX) survives without a restart budget:

    srun -N2 --ntasks-per-node=1 cohort run --nnodes 1:2 -n 2 \\
        examples/python/snapshot_train.py --kill-rank 3 --kill-at-epoch 1 --kill-agent

The snapshot must be on a path every node sees.
"""
import os
import signal

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from common import init, parse_args


def options(parser):
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16, help="per rank")
    parser.add_argument("--snapshot", default="snapshot.pt")
    parser.add_argument("--kill-rank", type=int, default=-1)
    parser.add_argument("--kill-at-epoch", type=int, default=-1)
    parser.add_argument("--kill-agent", action="store_true",
                        help="SIGKILL the agent (the parent process), not this rank")


class Trainer:
    def __init__(self, model, data, optimizer, snapshot):
        self.rank = dist.get_rank()
        self.model = model
        self.data = data
        self.optimizer = optimizer
        self.snapshot = snapshot
        self.epochs_run = 0
        if os.path.exists(snapshot):
            self._load_snapshot()
        self.model = DistributedDataParallel(self.model)

    def _load_snapshot(self):
        state = torch.load(self.snapshot)
        self.model.load_state_dict(state["MODEL_STATE"])
        self.epochs_run = state["EPOCHS_RUN"]
        print("[rank %d] Resuming training from snapshot at Epoch %d"
              % (self.rank, self.epochs_run), flush=True)

    def _save_snapshot(self, epoch):
        # Written aside, then renamed: a kill mid-write never leaves half a snapshot.
        state = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch + 1}
        torch.save(state, self.snapshot + ".tmp")
        os.replace(self.snapshot + ".tmp", self.snapshot)
        print("Epoch %d | Training snapshot saved at %s" % (epoch, self.snapshot), flush=True)

    def _run_epoch(self, epoch):
        self.data.sampler.set_epoch(epoch)
        loss = None
        for source, target in self.data:
            self.optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(self.model(source), target)
            loss.backward()
            self.optimizer.step()
        print("[rank %d] Epoch %d | Steps: %d | loss %.4f"
              % (self.rank, epoch, len(self.data), loss.item()), flush=True)

    def train(self, epochs, kill_rank, kill_at_epoch, kill_agent):
        restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        for epoch in range(self.epochs_run, epochs):
            if restart == 0 and self.rank == kill_rank and epoch == kill_at_epoch:
                victim = "my agent" if kill_agent else "myself"
                print("[rank %d] Epoch %d | killing %s (SIGKILL) to test restarts"
                      % (self.rank, epoch, victim), flush=True)
                os.kill(os.getppid() if kill_agent else os.getpid(), signal.SIGKILL)
            self._run_epoch(epoch)
            if self.rank == 0:
                self._save_snapshot(epoch)
            dist.barrier()  # the snapshot of this epoch exists before anyone goes on


def main():
    args = parse_args(__doc__.splitlines()[0], options)
    init(args)
    torch.manual_seed(0)
    dataset = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
    data = DataLoader(dataset, batch_size=args.batch, sampler=DistributedSampler(dataset))
    model = torch.nn.Linear(8, 1)
    trainer = Trainer(model, data, torch.optim.SGD(model.parameters(), lr=0.01), args.snapshot)
    trainer.train(args.epochs, args.kill_rank, args.kill_at_epoch, args.kill_agent)
    print("[rank %d] done: %d epochs (restart %s, world size %d)"
          % (dist.get_rank(), args.epochs, os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"),
             dist.get_world_size()),
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
