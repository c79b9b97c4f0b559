#!/usr/bin/env python3
"""bench/compare_allreduce and compare_collectives --one-job end to end:
cohort's shm (ordinary and allocated buffers) and MPI's own call
(MPI_Allreduce, MPI_Allgather, MPI_Gather) timed in one mpirun job
(build/bin/settings_in_one_job's mpi-raw), every round of every column kept
in the JSON, all_gather's sizes its whole output with nccl-tests' bus
bandwidth, all_reduce's memory-bandwidth floor and cross-core bound beside
the job's columns (runs of their own), each run's --plot drawn (SVG, its
text kept as text) with a line per column measured and the floors' band,
and what one job cannot measure refused by name.

    one_job_bench_test.py SOURCE_DIR BUILD_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

ROUNDS = 3
SIZES = ["4096", "8192"]
# all_reduce's bounds at n = 2: the cross-core one only where each rank has
# a CPU of its own (bench/allreduce/crosscore.c).
BOUNDS = ("floor", "xcore") if (os.cpu_count() or 1) >= 2 else ("floor",)


def main():
    source, build = sys.argv[1], sys.argv[2]
    script = os.path.join(source, "bench", "compare_allreduce")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "results.json")
        plot = os.path.join(tmp, "allreduce.svg")
        done = subprocess.run([script, "--build", build, "--one-job", "--ranks", "2", "--sizes",
                               "4K:8K", "--rounds", str(ROUNDS), "--json", out, "--plot", plot],
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "in one mpirun job: median of 3 rounds" in done.stdout, done.stdout
        # The table has the columns measured and no other.
        header = next(line for line in done.stdout.splitlines() if line.startswith("| size |"))
        xcore = "xcore" in BOUNDS
        assert header == ("| size | cohort (shm) | cohort (shm, allocate) | Open MPI "
                          f"| floor 2nS/B |{' xcore |' if xcore else ''} mpi/shm | floor/shm |"
                          f"{' xcore/shm |' if xcore else ''} mpi/alloc | floor/alloc "
                          "| mpi/shm by round |"), header
        with open(out) as f:
            results = json.load(f)
        check_plot(plot, ["all_reduce, float32 sum, n = 2", "cohort (shm)",
                          "cohort (shm, allocate)", "Open MPI", "median of 3 rounds in one job",
                          "floor (memory, cross-core)" if xcore else "floor (memory bandwidth)"],
                   ["cohort (gloo)", "PyTorch gloo"])
    # The bounds come from runs of their own, beside the job's columns.
    for column in ("shm", "shm_allocate", "mpi") + BOUNDS:
        times = results["2"][column]
        assert sorted(times) == SIZES, (column, times)
        assert all(t > 0 for t in times.values()), (column, times)
    rounds = results["rounds"]["2"]
    assert len(rounds) == ROUNDS, rounds
    for one in rounds:
        assert sorted(one) == ["mpi", "shm", "shm_allocate"], one
    # A cell is the median of its rounds, each round's time as the job gave it.
    for size in SIZES:
        by_round = sorted(one["mpi"][size] for one in rounds)
        assert results["2"]["mpi"][size] == by_round[ROUNDS // 2], (size, by_round)

    refused = subprocess.run([script, "--build", build, "--one-job", "--only", "shm,torch"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0, refused.stdout
    assert "--one-job measures shm, shm_allocate, mpi, floor, xcore; --only names torch" \
        in refused.stderr, refused.stderr
    check_collectives(os.path.join(source, "bench", "compare_collectives"), build)
    print("ok: shm, shm_allocate and mpi in one job, 3 rounds each, the floors beside; "
          "--only torch refused; "
          "all_gather and gather of n = 3 in one job; --ops barrier refused")


def check_plot(path, present, absent):
    """The SVG at `path` was drawn, and its text (a title, the legend) has
    every one of `present` and none of `absent`."""
    assert os.path.exists(path), f"no plot at {path}"
    with open(path) as f:
        svg = f.read()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg, svg[:200]
    text = svg.replace("&#39;", "'")
    for wanted in present:
        assert wanted in text, (path, wanted)
    for unwanted in absent:
        assert unwanted not in text, (path, unwanted)


def check_collectives(script, build):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "results.json")
        plot = os.path.join(tmp, "collectives.svg")
        done = subprocess.run([script, "--build", build, "--one-job", "--ops", "all_gather,gather",
                               "--ranks", "3", "--sizes", "4K:8K", "--rounds", str(ROUNDS),
                               "--json", out, "--plot", plot],
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Open MPI (its own call)" in done.stdout, done.stdout
        with open(out) as f:
            results = json.load(f)
        check_plot(plot, ["all_gather, n = 3", "cohort (shm)", "Open MPI (its own call)"],
                   ["cohort's mpi backend", "cohort (gloo)"])
        check_plot(plot, [">gather, n = 3<"], [])  # a panel of its own, not all_gather's
    for op in ("all_gather", "gather"):
        for column in ("shm", "alloc", "mpi"):
            rows = results[op]["3"][column]
            assert sorted(rows) == SIZES, (op, column, rows)
            for size, row in rows.items():
                assert row["time_us"] > 0 and row["bytes"] == int(size), row
                algbw = int(size) / row["time_us"] / 1e3
                assert abs(row["busbw_gbps"] - algbw * 2 / 3) < 1e-9 * algbw, row
        assert len(results["rounds"][op]["3"]) == ROUNDS
    refused = subprocess.run([script, "--build", build, "--one-job", "--ops", "barrier"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0, refused.stdout
    assert ("--one-job measures broadcast, all_gather, reduce_scatter, gather, scatter, "
            "all_to_all, reduce, send_recv; --ops names barrier") in refused.stderr, refused.stderr


if __name__ == "__main__":
    main()
