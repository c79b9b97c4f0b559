"""Columns of a benchmark's table measured in one mpirun job
(build/bin/settings_in_one_job): each round times every column one after
another in a shuffled order, so a slow stretch of this shared machine falls
on both sides of a ratio alike, where in jobs of their own it can fall on
one. A cell is the median of the job's rounds, as bench/in_rounds.py gives
them for columns measured in turns.

    table, rounds = measure_in_one_job(build, 2, "4K:1M", 21,
                                       {"shm": "shm", "mpi": "mpi-raw"})

`columns` maps a column's name to the settings_in_one_job config that
measures it (mpi-raw: MPI's own call). `table` is {column: {size: median
µs}} and `rounds` each round's own {column: {size: µs}}; both empty when
the job failed (its output then goes to stderr).
"""
import json
import os
import subprocess
import sys
import tempfile

from in_rounds import measure_in_rounds


def measure_in_one_job(build, n, sizes, rounds, columns, op="all_reduce", whole=False):
    """`whole`: sizes count the whole buffer (all_gather's output,
    reduce_scatter's input), as `cohort bench allreduce --op` does."""
    with tempfile.TemporaryDirectory(prefix="cohort-one-job-") as work:
        path = os.path.join(work, "rounds.json")
        command = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n),
                   os.path.join(build, "bin", "settings_in_one_job"), "--op", op,
                   *(["--whole"] if whole else []), "--sizes", sizes, "--rounds", str(rounds),
                   "--json", path, *columns.values()]
        print("$ " + " ".join(command), file=sys.stderr, flush=True)
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            print(done.stdout[-2000:] + done.stderr[-2000:], file=sys.stderr)
            return {}, []
        with open(path) as f:
            sizes_run = json.load(f)["sizes"]
    per_round = [{name: {row["bytes"]: row["rounds_us"][config][k] for row in sizes_run}
                  for name, config in columns.items()} for k in range(rounds)]
    return measure_in_rounds(lambda order: per_round.pop(0), list(columns), rounds)


def one_job_arguments(args, name):
    """--rounds' default (21 in one job, else 1), and --busy refused with
    --one-job: a round of one job is 100 operations or fewer, mostly within
    one time slice, where --busy's reps of 2000 span many."""
    if args.rounds is None:
        args.rounds = 21 if args.one_job else 1
    if args.one_job and args.busy:
        sys.exit(f"{name}: --busy runs in jobs of their own, not with --one-job")
