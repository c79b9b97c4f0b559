"""Columns of a benchmark's table measured in rounds, in turns: every column
runs once per round, in the columns' order, then in the reverse order, and
so on; a cell is the median of its rounds. A few busy seconds of this
shared machine (copies between its two vCPUs now and then run at half
speed for seconds to minutes) then fall on one round of one column, not
on a whole column, and both sides of a ratio meet the same moments.

    table, rounds = measure_in_rounds(measure, ["shm", "mpi"], 3)

`measure(order)` runs the columns in `order` once and returns
{column: {size: time}}; `table` is {column: {size: median time}} and
`rounds` each round's own {column: {size: time}}; `as_json` gives either
its sizes as JSON's string keys.

>>> calls = []
>>> def measure(order):
...     calls.append(list(order))
...     k = len(calls)
...     return {"a": {1: 10.0 * k}, "b": {1: 20.0, 2: 5.0 * k}}
>>> table, rounds = measure_in_rounds(measure, ["a", "b"], 3)
>>> calls
[['a', 'b'], ['b', 'a'], ['a', 'b']]
>>> table
{'a': {1: 20.0}, 'b': {1: 20.0, 2: 10.0}}
>>> ratio_range(rounds, "b", "a", 1)
'0.67–2.00× (1 of 3 below 1)'
>>> ratio_range(rounds, "b", "a", 2)
'—'
>>> as_json(table)
{'a': {'1': 20.0}, 'b': {'1': 20.0, '2': 10.0}}
"""
import statistics


def measure_in_rounds(measure, columns, rounds):
    per_round = []
    for k in range(max(1, rounds)):
        order = list(columns) if k % 2 == 0 else list(reversed(columns))
        per_round.append(measure(order))
    table = {}
    for column in columns:
        sizes = sorted({size for r in per_round for size in r.get(column, {})})
        for size in sizes:
            times = [r[column][size] for r in per_round if r.get(column, {}).get(size)]
            if times:
                table.setdefault(column, {})[size] = statistics.median(times)
    return table, per_round


def ratio_range(rounds, other, base, size):
    """The range of the rounds' own ratios of `other`'s time over `base`'s
    at `size` (above 1: `base` was faster), and how many were below 1."""
    ratios = [r[other][size] / r[base][size] for r in rounds
              if r.get(other, {}).get(size) and r.get(base, {}).get(size)]
    if not ratios:
        return "—"
    below = sum(ratio < 1 for ratio in ratios)
    return f"{min(ratios):.2f}–{max(ratios):.2f}× ({below} of {len(ratios)} below 1)"


def as_json(table):
    """{column: {size: value}} with its sizes as strings, as JSON keys are."""
    return {column: {str(size): value for size, value in by_size.items()}
            for column, by_size in table.items()}
