// reduction: every rank contributes 1, all_reduce sums them, and every rank
// prints the total, which is the number of ranks. The "hello world" of
// collectives, as in the PyTorch distributed tutorial.
#include <climits>
#include <cstdio>
#include <span>

#include <unistd.h>

#include <cohort/cohort.hpp>

int main() {
  try {
    cohort::World world = cohort::init();
    float data[] = {1.0f};
    world.communicator().all_reduce(std::span(data), cohort::ReduceOp::sum);
    const cohort::LaunchInfo& me = world.info();
    char host[HOST_NAME_MAX + 1] = {};
    gethostname(host, sizeof(host) - 1);
    std::printf("[%s:%d] [%s:%s] process %d/%d has data %g\n", me.master_addr.value.c_str(),
                me.master_port.value, host, std::string(world.backend()).c_str(), world.rank(),
                world.size(), static_cast<double>(data[0]));
    return 0;
  } catch (const cohort::Error& error) {
    std::fprintf(stderr, "reduction: %s\n", error.what());
    return 1;
  }
}
