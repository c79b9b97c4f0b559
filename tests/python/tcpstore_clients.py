"""Every rank opens several of PyTorch's own TCPStore clients on MASTER_ADDR:
MASTER_PORT and checks what each operation answers. Under `cohort run` the
agent's store serves that port (TORCHELASTIC_USE_AGENT_STORE=True); with
--no-agent-store rank 0 serves PyTorch's own store there, and the same
answers are expected of it.

Operations: set, get, add, wait (also with a timeout, after which the same
client goes on: 2.x's CANCEL_WAIT), check, compare_set, delete_key,
num_keys; on 2.x also append, multi_get, multi_set, and the queue and
list_keys operations where the client has them. Many clients wait at once
for a key the last rank sets. Prints one line per rank."""
import os
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
agent_store = os.environ["TORCHELASTIC_USE_AGENT_STORE"] == "True"
host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
CLIENTS = 4
WAITERS = 8
extended = hasattr(dist.TCPStore, "multi_get")  # PyTorch 2.1 and later


def client(server=False):
    return dist.TCPStore(host, port, world if server else None, server, timedelta(seconds=60),
                         wait_for_workers=False)


def check(what, got, expected):
    if got != expected:
        print(f"rank {rank}: {what}: got {got!r}, expected {expected!r}", file=sys.stderr)
        sys.exit(1)


# Without the agent's store, rank 0's first client serves it.
stores = [client(server=(i == 0 and rank == 0 and not agent_store)) for i in range(CLIENTS)]
store = stores[0]
keys = 0  # the keys this script sets, for num_keys
# add from every client of every rank, then a barrier built from add + wait.
for s in stores:
    s.add("count", 1)
if store.add("arrived", 1) == world:
    store.set("all_arrived", "1")
store.wait(["all_arrived"])
check("add", store.add("count", 0), CLIENTS * world)
keys += 3
# Many clients of every rank wait at once for one key, which the last rank
# to arrive sets; the waits are answered together.
import threading
import time

waiters = [client() for _ in range(WAITERS)]
woken = []
threads = [threading.Thread(target=lambda s=s: (s.wait(["go"]), woken.append(1)))
           for s in waiters]
for t in threads:
    t.start()
if store.add("waiting", 1) == world:
    store.set("go", "1")
for t in threads:
    t.join()
check("waiters woken", len(woken), WAITERS)
keys += 2
# set / get / wait across ranks, values of any bytes.
value = bytes(range(256)) * (rank + 1)
stores[1].set(f"key{rank}", value)
stores[2].wait([f"key{r}" for r in range(world)])
for r in range(world):
    check(f"get key{r}", stores[3].get(f"key{r}"), bytes(range(256)) * (r + 1))
keys += world
if hasattr(store, "check"):  # in Python from PyTorch 2.0
    check("check of set keys", store.check([f"key{r}" for r in range(world)]), True)
    check("check of a missing key", store.check(["never"]), False)
# compare_set: exactly one rank wins, everyone sees the winner.
winner = store.compare_set("leader", "", str(rank))
check("compare_set on a set key", store.compare_set("leader", "nobody", "x"),
      store.get("leader"))
check("compare_set when a missing key is expected to hold something",
      store.compare_set(f"missing{rank}", "something", "x"), b"something")
seen = int(store.get("leader"))
check("compare_set winner", winner, str(seen).encode())
keys += 1
# delete_key
store.set(f"tmp{rank}", "x")
check("delete_key", store.delete_key(f"tmp{rank}"), True)
check("delete_key again", store.delete_key(f"tmp{rank}"), False)
# wait with a timeout: a key nobody sets. The same client then goes on
# (2.x cancels the wait on the server: CANCEL_WAIT).
# 1.13 has no CANCEL_WAIT: its client cannot go on after a timed-out wait.
timed = stores[3] if extended else client()
try:
    timed.wait(["never"], timedelta(milliseconds=300))
    check("wait timeout", "returned", "raised")
except RuntimeError:  # 2.x's DistStoreError is one
    pass
if extended:
    check("get after a timed-out wait", timed.get(f"key{rank}"), value)
if extended:
    stores[1].append("log", f"<{rank}>")
    stores[2].multi_set([f"m{rank}a", f"m{rank}b"], [b"1", bytes([0, rank])])
    if store.add("extended", 1) == world:
        store.set("extended_done", "1")
    store.wait(["extended_done"])
    log = store.get("log").decode()
    check("append from every rank", sorted(log[i:i + 3] for i in range(0, len(log), 3)),
          sorted(f"<{r}>" for r in range(world)))
    check("multi_get", stores[3].multi_get([f"m{r}b" for r in range(world)]),
          [bytes([0, r]) for r in range(world)])
    keys += 1 + 2 * world + 2
if hasattr(dist.TCPStore, "queue_push"):  # PyTorch 2.7 and later
    stores[1].queue_push("q", f"item{rank}")
    got = stores[2].queue_pop("q")  # blocks until an item is there
    check("queue_pop", got.startswith(b"item"), True)
if hasattr(dist.TCPStore, "list_keys"):
    check("list_keys has every rank's key", set(f"key{r}" for r in range(world)) <=
          set(store.list_keys()), True)
# num_keys once every rank is done changing keys: only this script's keys,
# none of cohort's own.
if store.add("done", 1) == world:
    store.set("all_done", "1")
store.wait(["all_done"])
keys += 2
check(f"num_keys (the keys were {sorted(store.list_keys()) if hasattr(store, 'list_keys') else '?'})",
      store.num_keys(), keys)
# Rank 0's server must outlive every other rank's last request: a second
# round on "done", an existing key (a new one could be counted above by a
# slower rank), whose ADD is answered, so it was served.
store.add("done", 1)
while rank == 0 and store.add("done", 0) < 2 * world:
    time.sleep(0.05)
print(f"tcpstore rank {rank}/{world} torch {torch.__version__}: {CLIENTS} clients and "
      f"{WAITERS} waiters ok, leader {seen}, master {host}:{port}", flush=True)
