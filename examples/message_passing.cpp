// message_passing: a token travels once around the ring of ranks with send
// and recv, each rank adding its rank; then ranks 0 and 1 measure ping-pong
// latency (round trips of 4 bytes), as in the point-to-point tutorials.
//   message_passing [ROUND_TRIPS]   (default 1000)
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include <unistd.h>

#include <cohort/cohort.hpp>

int main(int argc, char** argv) {
  try {
    const int round_trips = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1000;
    cohort::World world = cohort::init();
    cohort::Communicator& comm = world.communicator();
    const int rank = world.rank(), size = world.size();
    const auto timeout = comm.default_timeout();

    // The ring: rank 0 starts the token, every other rank receives, adds
    // itself and passes it on; rank 0 receives it back.
    std::int64_t token[] = {0};
    const auto buffer = cohort::Buffer::of(std::span(token));
    if (rank == 0) {
      comm.send(buffer, (rank + 1) % size, 0, timeout);
      comm.recv(buffer, (rank + size - 1) % size, 0, timeout);
      std::printf("rank 0: the token went around %d ranks and came back as %lld (expected %lld)\n",
                  size, static_cast<long long>(token[0]),
                  static_cast<long long>(size) * (size - 1) / 2);
    } else {
      comm.recv(buffer, rank - 1, 0, timeout);
      token[0] += rank;
      comm.send(buffer, (rank + 1) % size, 0, timeout);
    }

    // Ping-pong between ranks 0 and 1.
    if (size >= 2 && rank < 2) {
      std::int32_t ball[] = {0};
      const auto message = cohort::Buffer::of(std::span(ball));
      std::vector<double> micros;
      micros.reserve(static_cast<std::size_t>(round_trips));
      for (int i = 0; i < round_trips; ++i) {
        const auto start = std::chrono::steady_clock::now();
        if (rank == 0) {
          comm.send(message, 1, 1, timeout);
          comm.recv(message, 1, 1, timeout);
        } else {
          comm.recv(message, 0, 1, timeout);
          comm.send(message, 0, 1, timeout);
        }
        micros.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count());
      }
      if (rank == 0) {
        std::sort(micros.begin(), micros.end());
        std::printf(
            "rank 0: ping-pong with rank 1 over %s, %d round trips of 4 bytes: "
            "median %.1f us, p90 %.1f us\n",
            std::string(world.backend()).c_str(), round_trips, micros[micros.size() / 2],
            micros[micros.size() * 9 / 10]);
      }
    }
    comm.barrier(timeout);
    return 0;
  } catch (const cohort::Error& error) {
    std::fprintf(stderr, "message_passing: %s\n", error.what());
    return 1;
  }
}
