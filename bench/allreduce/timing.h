/* What the C benchmarks of bench/allreduce time with: a monotonic clock in
 * seconds, and the median of a run's samples. */
#ifndef COHORT_BENCH_ALLREDUCE_TIMING_H
#define COHORT_BENCH_ALLREDUCE_TIMING_H

#include <stdlib.h>
#include <time.h>

static inline double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The median of `count` samples (sorts them in place). */
static inline double median(double* samples, int count) {
  qsort(samples, (size_t)count, sizeof(double), by_value);
  return samples[count / 2];
}

#endif
