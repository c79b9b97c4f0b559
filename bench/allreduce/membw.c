/* The memory-bandwidth floor of an all_reduce of N buffers of S bytes on this
 * machine: every input must be read once and every output written once, so
 * at least 2·N·S bytes move (../shared perf-anchors B.3). The bandwidth B is
 * measured here with the STREAM "add" kernel (c = a + b, 3 arrays counted)
 * on every core (OpenMP), with a working set like the all_reduce's (each
 * array N·S/2 bytes); the floor is 2·N·S / B. Median of REPS timed runs, one
 * JSON line per size.
 *
 *   membw N SIZES_BYTES_COMMA_SEPARATED REPS
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: membw N SIZES REPS\n");
    return 2;
  }
  const int ranks = atoi(argv[1]), reps = atoi(argv[3]);
  double* times = calloc((size_t)reps, sizeof(double));
  for (char* size_text = strtok(argv[2], ","); size_text; size_text = strtok(NULL, ",")) {
    const long size = atol(size_text);
    const long count = (long)ranks * size / 2 / 4;
    float* a = malloc((size_t)count * 4);
    float* b = malloc((size_t)count * 4);
    float* c = malloc((size_t)count * 4);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < count; ++i) a[i] = b[i] = c[i] = 0.0f; /* first touch by the workers */
    /* Enough repetitions inside a timed run to last about 10 ms at 10 GB/s. */
    long inner = (100L << 20) / (3L * count * 4);
    inner = inner < 1 ? 1 : inner;
    for (int rep = -1; rep < reps; ++rep) { /* rep -1 warms up */
      const double start = now();
      for (long k = 0; k < inner; ++k) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < count; ++i) c[i] = a[i] + b[i];
      }
      if (rep >= 0) times[rep] = (now() - start) / (double)inner;
    }
    const double bandwidth = 3.0 * (double)count * 4 / median(times, reps);
    printf("{\"bytes\": %ld, \"bandwidth_gbps\": %.2f, \"time_us\": %.3f, \"threads\": %d}\n",
           size, bandwidth / 1e9, 2.0 * ranks * (double)size / bandwidth * 1e6,
           omp_get_max_threads());
    fflush(stdout);
    free(a);
    free(b);
    free(c);
  }
  free(times);
  return 0;
}
