"""Plots of the collective benchmarks: time against size on log axes, one
line per peer, the physical floor as a band. Run by bench/compare_allreduce
and bench/compare_collectives (--plot FILE) with Debian's interpreter, whose
matplotlib is python3-matplotlib (scripts/install-deps test, or bench):

  /usr/bin/python3 bench/plot/plot_collectives.py allreduce RESULTS.json OUT.svg [TITLE]
  /usr/bin/python3 bench/plot/plot_collectives.py collectives RESULTS.json OUT.svg [TITLE]

RESULTS.json is what the benchmark's --json wrote. The format follows OUT's
suffix (.svg, .png, .pdf). One panel per rank count (and per operation for
`collectives`).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")  # no display: files only
matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: a small, diffable SVG
matplotlib.rcParams["svg.hashsalt"] = "cohort"  # the same data draws the same file
import matplotlib.pyplot as plt  # noqa: E402

# compare_allreduce's keys: label, and whether it is cohort's (solid) or a peer's (dashed).
ALLREDUCE_LINES = [
    ("shm", "cohort (shm)", "-"),
    ("shm_allocate", "cohort (shm, allocate)", "-"),
    ("shm_bound", "cohort (shm, --cpu-bind cores)", "-"),
    ("gloo", "cohort (gloo)", "-"),
    ("torch", "PyTorch gloo", "--"),
    ("mpi", "Open MPI", "--"),
    ("mpi_mt", "Open MPI (THREAD_MULTIPLE)", ":"),
]
COLLECTIVE_LINES = [
    ("shm", "cohort (shm)", "-"),
    ("alloc", "cohort (shm, allocate)", "-"),
    ("bound", "cohort (shm, --cpu-bind cores)", "-"),
    ("gloo", "cohort (gloo)", "-"),
    ("mpi", "Open MPI (cohort's mpi backend)", "--"),
]


def label_size(size):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale:
            return f"{size // scale}{unit}"
    return str(size)


def series(table):
    """{size text: microseconds} -> sorted sizes, times."""
    points = sorted((int(size), time) for size, time in table.items() if time)
    return [p[0] for p in points], [p[1] for p in points]


def panel(axes, title, tables, lines, floor=None, ceiling=None):
    sizes_seen = set()
    if floor and ceiling:
        # The band between the memory-bandwidth floor and the cross-core
        # bound: where no all_reduce on this machine can go below.
        low_bound, high_bound = dict(zip(*series(floor))), dict(zip(*series(ceiling)))
        common = sorted(set(low_bound) & set(high_bound))
        bounds = [(low_bound[s], high_bound[s]) for s in common]
        axes.fill_between(common, [min(b) for b in bounds], [max(b) for b in bounds],
                          color="0.85", label="floor (memory, cross-core)")
    elif floor:  # the cross-core bound needs a core per rank
        fs, ft = series(floor)
        axes.plot(fs, ft, color="0.6", linewidth=3, alpha=0.6, label="floor (memory bandwidth)")
    for key, label, style in lines:
        sizes, times = series(tables.get(key, {}))
        if not sizes:
            continue
        sizes_seen.update(sizes)
        axes.plot(sizes, times, style, marker="o", markersize=3, linewidth=1.4, label=label)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    ticks = sorted(sizes_seen)[::2]
    axes.set_xticks(ticks)
    axes.set_xticklabels([label_size(s) for s in ticks], rotation=45)
    axes.set_xlabel("bytes")
    axes.set_ylabel("time per operation (µs)")
    axes.set_title(title)
    axes.grid(True, which="major", linewidth=0.4)
    axes.legend(fontsize=7)


def plot_allreduce(results, out, title):
    ranks = sorted((n for n in results if n != "rounds"), key=int)
    figure, panels = plt.subplots(1, len(ranks), figsize=(6.5 * len(ranks), 5), squeeze=False)
    for axes, n in zip(panels[0], ranks):
        tables = results[n]
        panel(axes, f"all_reduce, float32 sum, n = {n}", tables, ALLREDUCE_LINES,
              tables.get("floor"), tables.get("xcore"))
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(out)


def plot_collectives(results, out, title):
    """results: {op: {n: {backend: {size: {"time_us": ...}}}}}, the rounds'
    own times under "rounds" (--rounds), not drawn, and under "labels" a
    column's legend where it is not COLLECTIVE_LINES' (--one-job's Open MPI
    is MPI's own call, not cohort's mpi backend)."""
    labels = results.get("labels", {})
    lines = [(key, labels.get(key, label), style) for key, label, style in COLLECTIVE_LINES]
    ops = [op for op in results if op not in ("rounds", "labels")]
    ranks = sorted({n for op in ops for n in results[op]}, key=int)
    figure, panels = plt.subplots(len(ops), len(ranks), figsize=(6.5 * len(ranks), 4.5 * len(ops)),
                                  squeeze=False)
    for row, op in enumerate(ops):
        for column, n in enumerate(ranks):
            tables = {backend: {size: cell["time_us"] for size, cell in rows.items()}
                      for backend, rows in results[op].get(n, {}).items()}
            panel(panels[row][column], f"{op}, n = {n}", tables, lines)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(out)


def main():
    if len(sys.argv) not in (4, 5) or sys.argv[1] not in ("allreduce", "collectives"):
        sys.exit(__doc__)
    kind, path, out = sys.argv[1:4]
    title = sys.argv[4] if len(sys.argv) == 5 else ""
    with open(path) as f:
        results = json.load(f)
    (plot_allreduce if kind == "allreduce" else plot_collectives)(results, out, title)


if __name__ == "__main__":
    main()
