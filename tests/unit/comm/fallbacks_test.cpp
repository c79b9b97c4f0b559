// The kit's fallback collectives over a Channel of in-process queues: ranks
// are threads, each message a copy. Checked against serial answers for 1 to
// 5 ranks, in place and not.
#include "comm/kit/fallbacks.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include <gtest/gtest.h>

#include <cohort/errors.hpp>

namespace cohort::detail {
namespace {

using namespace std::chrono_literals;

// Queues between every ordered pair of ranks.
struct Wires {
  std::mutex mutex;
  std::condition_variable arrived;
  std::map<std::pair<int, int>, std::deque<std::string>> queues;
};

class QueueChannel final : public Channel {
 public:
  QueueChannel(Wires& wires, int rank, int size) : wires_(wires), rank_(rank), size_(size) {}
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  void exchange(const void* send, std::size_t send_bytes, int to, void* recv,
                std::size_t recv_bytes, int from, Duration timeout) override {
    std::unique_lock lock(wires_.mutex);
    if (to >= 0) {
      wires_.queues[{rank_, to}].emplace_back(static_cast<const char*>(send), send_bytes);
      wires_.arrived.notify_all();
    }
    if (from < 0) return;
    auto& queue = wires_.queues[{from, rank_}];
    if (!wires_.arrived.wait_for(lock, timeout, [&] { return !queue.empty(); })) {
      throw Timeout("nothing from rank " + std::to_string(from));
    }
    ASSERT_EQ(queue.front().size(), recv_bytes);
    std::memcpy(recv, queue.front().data(), recv_bytes);
    queue.pop_front();
  }

 private:
  Wires& wires_;
  int rank_, size_;
};

// Runs body(channel) on one thread per rank.
void on_ranks(int n, const std::function<void(Channel&)>& body) {
  Wires wires;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      QueueChannel channel(wires, rank, n);
      body(channel);
    });
  }
  for (std::thread& thread : threads)
    thread.join();
}

// Element i of rank r's input.
std::int32_t value(int rank, std::size_t i) {
  return static_cast<std::int32_t>(rank * 1000 + i);
}

Buffer of(std::vector<std::int32_t>& values, std::size_t offset = 0, std::size_t count = 0) {
  return {values.data() + offset, count == 0 ? values.size() - offset : count, DataType::i32};
}

constexpr std::size_t kSlice = 3;

TEST(Fallbacks, RingReduceScatterSumsEachSlice) {
  for (int n = 1; n <= 5; ++n) {
    for (bool in_place : {false, true}) {
      on_ranks(n, [&](Channel& channel) {
        const int me = channel.rank();
        std::vector<std::int32_t> input(kSlice * n), output(kSlice);
        for (std::size_t i = 0; i < input.size(); ++i)
          input[i] = value(me, i);
        const Buffer out = in_place ? of(input, kSlice * me, kSlice) : of(output);
        ring_reduce_scatter(channel, of(input), out, ReduceOp::sum, 5s);
        const auto* got = static_cast<const std::int32_t*>(out.data);
        for (std::size_t i = 0; i < kSlice; ++i) {
          std::int32_t want = 0;
          for (int r = 0; r < n; ++r)
            want += value(r, kSlice * me + i);
          EXPECT_EQ(got[i], want) << n << " ranks, rank " << me << ", element " << i;
        }
      });
    }
  }
}

TEST(Fallbacks, RingReduceScatterAverages) {
  on_ranks(4, [&](Channel& channel) {
    std::vector<std::int32_t> input(kSlice * 4, 8 * (channel.rank() + 1)), output(kSlice);
    ring_reduce_scatter(channel, of(input), of(output), ReduceOp::avg, 5s);
    EXPECT_EQ(output[0], (8 + 16 + 24 + 32) / 4);
  });
}

TEST(Fallbacks, RingAllReduceOfEveryCountAndRankCount) {
  for (int n = 1; n <= 5; ++n) {
    for (std::size_t count : {0, 1, 3, 7, 10}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
        on_ranks(n, [&](Channel& channel) {
          std::vector<std::int32_t> data(count);
          for (std::size_t i = 0; i < count; ++i)
            data[i] = value(channel.rank(), i);
          ring_all_reduce(channel, of(data), op, 5s);
          for (std::size_t i = 0; i < count; ++i) {
            std::int32_t want = op == ReduceOp::sum ? 0 : value(0, i);
            for (int r = 0; r < n; ++r)
              want = op == ReduceOp::sum ? want + value(r, i) : std::max(want, value(r, i));
            EXPECT_EQ(data[i], want) << n << " ranks, " << count << " elements, rank "
                                     << channel.rank() << ", element " << i;
          }
        });
      }
    }
  }
}

TEST(Fallbacks, RingAllGatherInPlaceAndNot) {
  for (int n = 1; n <= 5; ++n) {
    for (bool in_place : {false, true}) {
      on_ranks(n, [&](Channel& channel) {
        const int me = channel.rank();
        std::vector<std::int32_t> input(kSlice), output(kSlice * n, -1);
        for (std::size_t i = 0; i < kSlice; ++i)
          (in_place ? output[kSlice * me + i] : input[i]) = value(me, i);
        const Buffer in = in_place ? of(output, kSlice * me, kSlice) : of(input);
        ring_all_gather(channel, in, of(output), 5s);
        for (std::size_t i = 0; i < output.size(); ++i) {
          EXPECT_EQ(output[i], value(static_cast<int>(i / kSlice), i % kSlice))
              << n << " ranks, rank " << me << ", element " << i;
        }
      });
    }
  }
}

TEST(Fallbacks, TreeBroadcastReachesEveryRankFromEveryRoot) {
  for (int n = 1; n <= 7; ++n) {
    for (int root = 0; root < n; ++root) {
      on_ranks(n, [&](Channel& channel) {
        std::vector<std::int32_t> data(kSlice, -1);
        if (channel.rank() == root) {
          for (std::size_t i = 0; i < kSlice; ++i)
            data[i] = value(root, i);
        }
        tree_broadcast(channel, of(data), root, 5s);
        for (std::size_t i = 0; i < kSlice; ++i) {
          EXPECT_EQ(data[i], value(root, i))
              << n << " ranks, root " << root << ", rank " << channel.rank();
        }
      });
    }
  }
}

TEST(Fallbacks, DirectAllToAllInPlaceAndNot) {
  for (int n = 1; n <= 5; ++n) {
    for (bool in_place : {false, true}) {
      on_ranks(n, [&](Channel& channel) {
        const int me = channel.rank();
        std::vector<std::int32_t> input(kSlice * n), output(kSlice * n);
        for (std::size_t i = 0; i < input.size(); ++i)
          input[i] = value(me, i);
        std::vector<std::int32_t>& result = in_place ? input : output;
        direct_all_to_all(channel, of(input), of(result), 5s);
        for (int from = 0; from < n; ++from) {
          for (std::size_t i = 0; i < kSlice; ++i) {
            EXPECT_EQ(result[kSlice * from + i], value(from, kSlice * me + i))
                << n << " ranks, rank " << me;
          }
        }
      });
    }
  }
}

TEST(Fallbacks, DirectGatherAndScatterAtEveryRoot) {
  for (int n = 1; n <= 5; ++n) {
    for (int root = 0; root < n; ++root) {
      on_ranks(n, [&](Channel& channel) {
        const int me = channel.rank();
        // gather, in place at the root
        std::vector<std::int32_t> whole(kSlice * n, -1);
        for (std::size_t i = 0; i < kSlice; ++i)
          whole[kSlice * me + i] = value(me, i);
        direct_gather(channel, of(whole, kSlice * me, kSlice), of(whole), root, 5s);
        if (me == root) {
          for (std::size_t i = 0; i < whole.size(); ++i)
            EXPECT_EQ(whole[i], value(static_cast<int>(i / kSlice), i % kSlice));
        }
        // scatter of the root's values
        std::vector<std::int32_t> slices(kSlice * n), mine(kSlice);
        for (std::size_t i = 0; i < slices.size(); ++i)
          slices[i] = value(me, i);
        direct_scatter(channel, of(slices), of(mine), root, 5s);
        for (std::size_t i = 0; i < kSlice; ++i)
          EXPECT_EQ(mine[i], value(root, kSlice * me + i)) << "root " << root;
      });
    }
  }
}

}  // namespace
}  // namespace cohort::detail
