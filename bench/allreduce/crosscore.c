/* What an all_reduce of N buffers of S bytes must move between cores on this
 * machine, and how long that takes here: the cross-core bound beside
 * membw.c's memory floor.
 *
 * Any all_reduce algorithm makes every rank receive at least 2·(N-1)/N·S bytes
 * from the others (a reduce-scatter and an all-gather, each (N-1)/N·S: the
 * bandwidth lower bound of the all_reduce literature). With ranks on
 * different cores and their data in their own caches (an in-place
 * all_reduce of data the rank just wrote), those bytes cross from one core's
 * cache to another's, which is slower than a core reading its own cache.
 *
 * N threads, one per CPU of the affinity mask (pinned), play the ranks: each
 * writes its S-byte buffer, all meet at a barrier, then each reads
 * 2·(N-1)/N·S bytes of the others' buffers (equal parts of each) and all meet
 * again. The time of that read phase (slowest thread; median of REPS) is the
 * bound printed, one JSON line per size. No output when N is above the CPUs
 * the process may use: then ranks share cores and no cross-core bound holds.
 *
 *   crosscore N SIZES_BYTES_COMMA_SEPARATED REPS
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

enum { kMaxThreads = 256, kMaxReps = 1024 };

static int ranks, reps;
static size_t size;
static uint64_t* buffers[kMaxThreads];
static int cpus[kMaxThreads];
static double read_seconds[kMaxReps][kMaxThreads]; /* [rep][rank] */
static atomic_int arrived;
static volatile uint64_t sink;

/* A spinning barrier: the threads have a core each, and a sleeping barrier
 * would time its own wake-ups. `round` counts barriers from 1. */
static void barrier(int round) {
  atomic_fetch_add(&arrived, 1);
  while (atomic_load(&arrived) < round * ranks) {
  }
}

static void* rank_main(void* arg) {
  const int me = (int)(intptr_t)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus[me], &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  const size_t words = size / 8;
  buffers[me] = aligned_alloc(4096, (words * 8 + 4095) / 4096 * 4096);
  /* 2/N of each peer's buffer, at a different place for each peer. */
  const size_t part = words * 2 / (size_t)ranks;
  int round = 0;
  for (int rep = -1; rep < reps; ++rep) { /* rep -1 warms up */
    for (size_t i = 0; i < words; ++i)
      buffers[me][i] = (uint64_t)(rep + me) * i;
    barrier(++round);
    const double start = now();
    uint64_t sum = 0;
    for (int k = 1; k < ranks; ++k) {
      const uint64_t* from =
          buffers[(me + k) % ranks] + (size_t)(k - 1) * part % (words - part + 1);
      for (size_t i = 0; i < part; ++i)
        sum += from[i];
    }
    sink = sum;
    if (rep >= 0) read_seconds[rep][me] = now() - start;
    barrier(++round); /* nobody writes a buffer that a peer still reads */
  }
  barrier(++round); /* nobody frees a buffer that a peer still reads */
  free(buffers[me]);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: crosscore N SIZES REPS\n");
    return 2;
  }
  ranks = atoi(argv[1]);
  reps = atoi(argv[3]);
  if (ranks < 2 || ranks > kMaxThreads || reps < 1 || reps > kMaxReps) {
    fprintf(stderr, "crosscore: N must be 2..%d and REPS 1..%d\n", kMaxThreads, kMaxReps);
    return 2;
  }
  cpu_set_t allowed;
  sched_getaffinity(0, sizeof allowed, &allowed);
  int found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < ranks; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) cpus[found++] = cpu;
  if (found < ranks) {
    fprintf(stderr, "crosscore: %d ranks, %d CPUs: ranks would share cores; no bound printed\n",
            ranks, CPU_COUNT(&allowed));
    return 0;
  }
  double* times = calloc((size_t)reps, sizeof(double));
  for (char* text = strtok(argv[2], ","); text; text = strtok(NULL, ",")) {
    size = (size_t)atol(text) / 8 * 8;
    if (size < 8 * (size_t)ranks) continue;
    atomic_store(&arrived, 0);
    pthread_t threads[kMaxThreads];
    for (int r = 0; r < ranks; ++r)
      pthread_create(&threads[r], NULL, rank_main, (void*)(intptr_t)r);
    for (int r = 0; r < ranks; ++r)
      pthread_join(threads[r], NULL);
    for (int rep = 0; rep < reps; ++rep) {
      times[rep] = 0;
      for (int r = 0; r < ranks; ++r)
        if (read_seconds[rep][r] > times[rep]) times[rep] = read_seconds[rep][r];
    }
    const double seconds = median(times, reps);
    const double bytes = 2.0 * (ranks - 1) / ranks * (double)size;
    printf("{\"bytes\": %zu, \"cross_core_gbps\": %.2f, \"time_us\": %.3f, \"threads\": %d}\n",
           size, bytes / seconds / 1e9, seconds * 1e6, ranks);
    fflush(stdout);
  }
  free(times);
  return 0;
}
