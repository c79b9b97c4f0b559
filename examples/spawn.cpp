// spawn: one process per node starts its own workers, as
// torch.multiprocessing.spawn does. `./spawn 2` runs 2 workers here;
// `srun -N2 --ntasks-per-node=1 ./spawn 2` runs 4, ranks node_rank * 2 + i.
// Each worker joins the job with cohort::init() and sums a 1 from every rank.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <span>

#include <unistd.h>

#include <cohort/cohort.hpp>

namespace {

int worker() {
  cohort::World world = cohort::init();
  float data[] = {1.0f};
  world.communicator().all_reduce(std::span(data), cohort::ReduceOp::sum);
  char host[HOST_NAME_MAX + 1] = {};
  gethostname(host, sizeof(host) - 1);
  std::printf("[%s] spawned worker %d (local %d) of %d has data %g\n", host, world.rank(),
              world.info().local_rank.value, world.size(), static_cast<double>(data[0]));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int workers = argc > 1 ? std::atoi(argv[1]) : 2;
  try {
    return cohort::spawn(workers, worker);
  } catch (const cohort::Error& error) {
    std::fprintf(stderr, "spawn: %s\n", error.what());
    return 1;
  }
}
