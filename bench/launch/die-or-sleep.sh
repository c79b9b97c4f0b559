#!/bin/sh
# The teardown benchmark's worker: rank 1 writes the time (ns since the epoch)
# to $1 and SIGKILLs itself after 0.5 s; every other rank sleeps 30 s, which a
# launcher must cut short. A script, not `sh -c`, because torchrun rewrites
# `$$` in its arguments (string.Template substitution).
rank=${RANK:-$OMPI_COMM_WORLD_RANK}
if [ "$rank" = 1 ]; then
  sleep 0.5
  date +%s%N > "$1"
  kill -9 $$
fi
exec sleep 30
