/* Open MPI's MPI_Allreduce, timed like `cohort bench allreduce`: float32 sum
 * with MPI_IN_PLACE; per size a warm-up, then REPS reps of ITERS back-to-back
 * operations; a rep's time is the slowest rank's mean, and the median rep is
 * reported. One JSON line per size on rank 0's stdout.
 *
 *   mpirun -np N allreduce_mpi SIZES_BYTES_COMMA_SEPARATED ITERS REPS WARMUP [multiple]
 *
 * With "multiple", MPI is initialised with MPI_THREAD_MULTIPLE, as cohort's
 * mpi backend initialises it (Open MPI then takes locks on every call).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

int main(int argc, char** argv) {
  if (argc > 5 && strcmp(argv[5], "multiple") == 0) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  if (argc < 5) {
    fprintf(stderr, "usage: allreduce_mpi SIZES ITERS REPS WARMUP\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int iters = atoi(argv[2]), reps = atoi(argv[3]), warmup = atoi(argv[4]);
  double* times = calloc((size_t)reps, sizeof(double));
  for (char* size_text = strtok(argv[1], ","); size_text; size_text = strtok(NULL, ",")) {
    const long size = atol(size_text);
    const int count = (int)(size / 4);
    float* data = malloc((size_t)size);
    for (int i = 0; i < count; ++i) data[i] = 1.0f;
    long n = (1L << 30) / size;
    n = n < 3 ? 3 : n > iters ? iters : n;
    for (int i = 0; i < warmup; ++i)
      MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int rep = 0; rep < reps; ++rep) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      for (long i = 0; i < n; ++i)
        MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double mean = (MPI_Wtime() - start) / (double)n;
      MPI_Allreduce(MPI_IN_PLACE, &mean, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      times[rep] = mean;
    }
    const double seconds = median(times, reps);
    if (rank == 0) printf("{\"bytes\": %ld, \"time_us\": %.3f}\n", size, seconds * 1e6);
    fflush(stdout);
    free(data);
  }
  free(times);
  MPI_Finalize();
  return 0;
}
