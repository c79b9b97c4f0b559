// A program that uses MPI itself beside cohort (mpi_program_test.cpp), under
// mpirun. argv[1] says who initialises MPI:
//   multiple  the program, MPI_Init_thread(MPI_THREAD_MULTIPLE), and it
//             finalizes MPI itself while its World is still alive
//   single    the program, MPI_Init (MPI_THREAD_SINGLE): cohort must not use
//             MPI then, and its collectives go over shm (one host) or gloo
//   cohort    cohort (at the first collective); the program then uses MPI
//             too, and leaves the finalizing to cohort at exit
//   hang      the program, MPI_Init; then rank 0 sleeps and the others wait
//             in MPI_Barrier, until the test's deadline ends the job
// Every rank prints "backend B cohort S mpi M level L" (both sums are the
// world size; L is MPI's thread level: single, serialized or multiple).
#include <cstdio>
#include <span>
#include <string_view>

#include <mpi.h>
#include <unistd.h>

#include <cohort/cohort.hpp>

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "cohort";
  if (mode == "hang") {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) pause();
    MPI_Barrier(MPI_COMM_WORLD);
    return 0;
  }
  if (mode == "multiple") {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else if (mode == "single") {
    MPI_Init(&argc, &argv);
  }
  try {
    cohort::World world = cohort::init();
    std::int32_t mine[] = {1};
    world.communicator().all_reduce(std::span(mine), cohort::ReduceOp::sum);
    int initialised = 0;
    MPI_Initialized(&initialised);
    std::int32_t theirs = 1, total = 0;
    int level = MPI_THREAD_SINGLE;
    if (initialised) {
      MPI_Allreduce(&theirs, &total, 1, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
      MPI_Query_thread(&level);
    }
    const char* level_name = level == MPI_THREAD_MULTIPLE     ? "multiple"
                             : level == MPI_THREAD_SERIALIZED ? "serialized"
                                                              : "single";
    std::printf("backend %s cohort %d mpi %d level %s\n", std::string(world.backend()).c_str(),
                mine[0], total, level_name);
    std::fflush(stdout);
    if (mode != "cohort") MPI_Finalize();  // before the World goes: cohort must cope
  } catch (const cohort::Error& error) {
    std::fprintf(stderr, "mpi_program: %s\n", error.what());
    return 1;
  }
  return 0;
}
