/* The MPI counterpart of examples/hello.cpp: MPI_Init, one barrier, hello. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  printf("hello from [%s:mpi] process %d/%d\n", host, rank, world);
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
