"""A benchmark's table in Markdown, without the columns it did not measure:
a column whose every cell is "—" (not run: `--only`, `--one-job`, a peer
missing on this machine) is left out, its title with it, so that a table
of three measured columns is not printed twenty-two wide.

>>> print_table(["size", "shm", "gloo", "mpi/shm"],
...             [["4 KiB", "1.0 µs", "—", "2.00×"], ["8 KiB", "2.0 µs", "—", "—"]])
| size | shm | mpi/shm |
|---|---|---|
| 4 KiB | 1.0 µs | 2.00× |
| 8 KiB | 2.0 µs | — |
>>> print_table(["size", "shm"], [])
| size | shm |
|---|---|
"""

MISSING = "—"


def print_table(titles, rows):
    """Prints `rows` (lists of cells, as long as `titles`) under `titles`,
    keeping the first column and every other that has a measured cell."""
    for row in rows:
        if len(row) != len(titles):
            raise ValueError(f"a row of {len(row)} cells under {len(titles)} titles: {row}")
    keep = [c for c in range(len(titles))
            if c == 0 or not rows or any(row[c] != MISSING for row in rows)]
    print("| " + " | ".join(titles[c] for c in keep) + " |")
    print("|---" * len(keep) + "|")
    for row in rows:
        print("| " + " | ".join(row[c] for c in keep) + " |", flush=True)
