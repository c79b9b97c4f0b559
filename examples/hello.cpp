// hello: the same binary under every launcher. Run it alone, under
// `cohort run -n 4`, `mpirun -np 4` or `srun -n4`: each process learns who it
// is from whatever started it, meets the others through the job's store, and
// says hello the way the launch tutorials do.
#include <climits>
#include <cstdio>

#include <unistd.h>

#include <cohort/cohort.hpp>

int main() {
  try {
    cohort::World world = cohort::init();
    const cohort::LaunchInfo& me = world.info();
    char host[HOST_NAME_MAX + 1] = {};
    gethostname(host, sizeof(host) - 1);
    std::printf("[%s:%d] hello from [%s:%s] process %d/%d\n", me.master_addr.value.c_str(),
                me.master_port.value, host, std::string(world.backend()).c_str(), world.rank(),
                world.size());
    std::fflush(stdout);
    world.barrier();  // nobody leaves before everyone said hello
    return 0;
  } catch (const cohort::Error& error) {
    std::fprintf(stderr, "hello: %s\n", error.what());
    return 1;
  }
}
