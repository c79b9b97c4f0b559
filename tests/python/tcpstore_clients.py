"""Every rank opens several of PyTorch's own TCPStore clients on MASTER_ADDR:
MASTER_PORT, where `cohort run` serves PyTorch's TCPStore protocol, and
checks what each operation answers: set, get, add, wait (also with a
timeout), compare_set, delete_key, num_keys. Prints one line per rank."""
import os
import sys
from datetime import timedelta

import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
assert os.environ["TORCHELASTIC_USE_AGENT_STORE"] == "True", "not the agent's store"
host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
CLIENTS = 4


def client():
    return dist.TCPStore(host, port, None, False, timedelta(seconds=60), wait_for_workers=False)


def check(what, got, expected):
    if got != expected:
        print(f"rank {rank}: {what}: got {got!r}, expected {expected!r}", file=sys.stderr)
        sys.exit(1)


stores = [client() for _ in range(CLIENTS)]
store = stores[0]
# add from every client of every rank, then a barrier built from add + wait.
for s in stores:
    s.add("count", 1)
if store.add("arrived", 1) == world:
    store.set("all_arrived", "1")
store.wait(["all_arrived"])
check("add", store.add("count", 0), CLIENTS * world)
# set / get / wait across ranks, values of any bytes.
value = bytes(range(256)) * (rank + 1)
stores[1].set(f"key{rank}", value)
stores[2].wait([f"key{r}" for r in range(world)])
for r in range(world):
    check(f"get key{r}", stores[3].get(f"key{r}"), bytes(range(256)) * (r + 1))
# compare_set: exactly one rank wins, everyone sees the winner.
winner = store.compare_set("leader", "", str(rank))
check("compare_set on a set key", store.compare_set("leader", "nobody", "x"),
      store.get("leader"))
check("compare_set when a missing key is expected to hold something",
      store.compare_set(f"missing{rank}", "something", "x"), b"something")
seen = int(store.get("leader"))
check("compare_set winner", winner, str(seen).encode())
# delete_key
store.set(f"tmp{rank}", "x")
check("delete_key", store.delete_key(f"tmp{rank}"), True)
check("delete_key again", store.delete_key(f"tmp{rank}"), False)
# wait with a timeout: a key nobody sets.
try:
    client().wait(["never"], timedelta(milliseconds=300))
    check("wait timeout", "returned", "raised")
except RuntimeError:
    pass
# num_keys once every rank is done changing keys: only this script's keys,
# none of cohort's own.
if store.add("done", 1) == world:
    store.set("all_done", "1")
store.wait(["all_done"])
expected = 1 + 1 + 1 + world + 1 + 1 + 1  # count arrived all_arrived key* leader done all_done
check("num_keys", store.num_keys(), expected)
print(f"tcpstore rank {rank}/{world}: {CLIENTS} clients ok, leader {seen}", flush=True)
