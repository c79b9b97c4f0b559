#!/usr/bin/env python3
"""A busy machine for a benchmark: one CPU-bound process per CPU this
process may run on, at the benchmark's own priority, for as long as the
`with` block lasts, as a data loader or another job's rank would be.

    with busy_machine(enabled=args.busy) as hogs:
        ...  # every measurement here shares the cores with `hogs` processes

Or around any command, which exits with the command's status:

    bench/busy_machine.py build/bin/cohort run -n 2 build/bin/settings_in_one_job shm ...
"""
import contextlib
import os
import signal
import subprocess
import sys

# A loop with no system calls: it never sleeps, so the scheduler must share
# each core between it and whatever the benchmark runs there.
_SPIN = "while True:\n    pass\n"


@contextlib.contextmanager
def busy_machine(enabled=True):
    if not enabled:
        yield 0
        return
    count = len(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(count)]
    print(f"busy machine: {count} CPU-bound processes beside the benchmark (pids "
          f"{', '.join(str(h.pid) for h in hogs)})", file=sys.stderr, flush=True)
    try:
        yield count
    finally:
        for hog in hogs:
            hog.send_signal(signal.SIGKILL)
        for hog in hogs:
            hog.wait()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: bench/busy_machine.py COMMAND [ARG...]: runs COMMAND beside one "
                 "CPU-bound process per CPU")
    with busy_machine():
        sys.exit(subprocess.run(sys.argv[1:]).returncode)
