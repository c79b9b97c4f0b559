// hello: the same binary under every launcher. Run it alone, under
// `mpirun -np 4`, `srun -n4` or (soon) `cohort run -n 4`: each process learns
// who it is from whatever started it.
#include <climits>
#include <cstdio>

#include <unistd.h>

#include <cohort/cohort.hpp>

int main() {
  try {
    const cohort::LaunchInfo me = cohort::detect_launch();
    char host[HOST_NAME_MAX + 1] = {};
    gethostname(host, sizeof(host) - 1);
    std::printf("hello from rank %d of %d (local rank %d on %s, launcher %s)\n", me.rank.value,
                me.world_size.value, me.local_rank.value, host,
                std::string(cohort::to_string(me.launcher.value)).c_str());
    return 0;
  } catch (const cohort::Error& error) {
    std::fprintf(stderr, "hello: %s\n", error.what());
    return 1;
  }
}
