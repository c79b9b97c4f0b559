#!/usr/bin/env python3
"""build/bin/rendezvous_scale end to end, small: 512 simulated ranks, 8 a
node (64 nodes, two levels of the agents' tree of 32), every pattern of a
job's start answered through the nodes' relays

- with the relays as threads and the tree known ahead: the store holds
  fewer descriptors than there are nodes (its 32 children, not one
  connection per node);
- with every relay at the store (--tree-width 0): at least one per node,
  so the column counts what it says;
- the hosts pattern's ranks per identity: a simulated node's, or
  --ranks-per-host's;
- with each node's relay in a process of its own, placed as it arrives
  (--processes nodes --tree-by-arrival), as agents of a torchrun-form job
  that start at once; with --phases each of those processes says its
  threads' CPU by name.

    rendezvous_scale_bench_test.py BUILD_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

RANKS = 512
PER_NODE = 8
NODES = RANKS // PER_NODE
PATTERNS = ("barrier", "table", "hosts")


def run(build, *flags):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        command = [os.path.join(build, "bin", "rendezvous_scale"), "--sizes", str(RANKS),
                   "--ranks-per-node", str(PER_NODE), "--patterns", ",".join(PATTERNS),
                   "--torch-max", "0", "--json", out, *flags]
        done = subprocess.run(command, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, " ".join(command) + "\n" + done.stdout + done.stderr
        with open(out) as f:
            rows = json.load(f)
    assert [row["pattern"] for row in rows] == list(PATTERNS), rows
    for row in rows:
        assert row["n"] == RANKS and row["cohort_s"] is not None, (flags, row, done.stderr)
        assert row["tcpstore_s"] is None, row  # --torch-max 0
    return rows, done.stdout, done.stderr


def main():
    build = sys.argv[1]
    rows, stdout, _ = run(build)
    assert "relays are threads" in stdout, stdout
    # The hosts pattern's identities: one a simulated node unless told.
    assert f"hosts: {PER_NODE} ranks share a host identity (a simulated node's" in stdout, stdout
    for row in rows:
        assert row["cohort_fds"] < NODES, ("the tree", row)
    rows, stdout, _ = run(build, "--tree-width", "0", "--ranks-per-host", "3")
    assert "hosts: 3 ranks share a host identity (--ranks-per-host)" in stdout, stdout
    for row in rows:
        assert row["cohort_fds"] >= NODES, ("every relay at the store", row)
    _, stdout, stderr = run(build, "--processes", "nodes", "--tree-by-arrival", "--phases")
    assert "a process of its own" in stdout, stdout
    # --phases: each process's threads' CPU by name, the relay's among them.
    cpu = [line for line in stderr.splitlines() if "CPU by thread name, ms:" in line]
    assert len(cpu) == len(PATTERNS) * NODES, stderr
    assert all(" cohort-relay " in line for line in cpu), cpu[:3]
    print("rendezvous_scale: every pattern answered, threads and processes")


if __name__ == "__main__":
    main()
