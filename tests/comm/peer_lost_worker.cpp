// One rank of the PeerLost test (peer_lost_test.cpp): joins the world from
// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, connects the communicator, and
// all-reduces in a loop (argv[3] floats, 1 by default, in memory from
// Communicator::allocate when argv[4] is "allocate"); rank VICTIM
// (argv[1]) SIGKILLs itself once connected, or stops (SIGSTOP) when argv[2]
// is "stop". Survivors report how the loss surfaced:
//   exit 3  cohort::PeerLost (message on stderr, with the time it took)
//   exit 4  cohort::Timeout   exit 5  another cohort::Error   exit 0  no loss seen
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include <cohort/cohort.hpp>

int main(int argc, char** argv) {
  const int victim = argc > 1 ? std::atoi(argv[1]) : 1;
  const int signal = argc > 2 && std::string_view(argv[2]) == "stop" ? SIGSTOP : SIGKILL;
  cohort::World world = cohort::init();
  cohort::Communicator& comm = world.communicator();
  std::vector<float> own(argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 1, 1.0f);
  std::span<float> value(own);
  std::shared_ptr<void> allocated;
  if (argc > 4 && std::string_view(argv[4]) == "allocate") {
    allocated = comm.allocate(own.size() * sizeof(float));
    value = std::span(static_cast<float*>(allocated.get()), own.size());
    std::fill(value.begin(), value.end(), 1.0f);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
  };
  try {
    // Everyone is connected after the first one; the survivors may still be
    // in it when the victim goes.
    comm.all_reduce(value, cohort::ReduceOp::max);
    if (world.rank() == victim) raise(signal);
    for (int i = 0; i < 100000; ++i)
      comm.all_reduce(value, cohort::ReduceOp::max);
  } catch (const cohort::PeerLost& error) {
    std::fprintf(stderr, "PeerLost after %lld ms: peer_rank=%d: %s\n",
                 static_cast<long long>(elapsed()), error.peer_rank(), error.what());
    std::_Exit(3);  // the world's store is gone with its peers: skip the goodbyes
  } catch (const cohort::Timeout& error) {
    std::fprintf(stderr, "Timeout after %lld ms: %s\n", static_cast<long long>(elapsed()),
                 error.what());
    std::_Exit(4);
  } catch (const cohort::Error& error) {
    std::fprintf(stderr, "Error after %lld ms: %s\n", static_cast<long long>(elapsed()),
                 error.what());
    std::_Exit(5);
  }
  return 0;
}
