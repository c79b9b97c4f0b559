"""Writes a benchmark's plot (plot_collectives.py) with Debian's interpreter,
where python3-matplotlib lives; the benchmark itself may run under another."""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PLOTTING_PYTHON = "/usr/bin/python3"


def write_plot(kind, results_json, out, reps, of="reps"):
    """Returns whether OUT was written; says why not on stderr. Its title
    dates the run and names the machine's CPUs and the benchmark's `reps`
    (or what `of` names: "rounds in one job")."""
    title = f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, median of {reps} {of}"
    if subprocess.run([PLOTTING_PYTHON, "-c", "import matplotlib"],
                      capture_output=True).returncode != 0:
        print(f"no plot: {PLOTTING_PYTHON} has no matplotlib (apt install python3-matplotlib, "
              "or scripts/install-deps bench)", file=sys.stderr)
        return False
    done = subprocess.run([PLOTTING_PYTHON, os.path.join(HERE, "plot_collectives.py"), kind,
                           results_json, out, title], capture_output=True, text=True)
    if done.returncode != 0:
        print(f"no plot: {done.stderr.strip()[-2000:]}", file=sys.stderr)
        return False
    print(f"plot: {out}", file=sys.stderr)
    return True
