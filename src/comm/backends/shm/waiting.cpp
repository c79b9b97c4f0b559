#include "comm/backends/shm/waiting.hpp"

#include <algorithm>
#include <chrono>
#include <climits>

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace cohort::detail::shm_backend {
namespace {

// The futex word is the counter's value. Not FUTEX_PRIVATE_FLAG: the
// sleepers and the waker are different processes mapping the same memfd.
std::uint32_t* word(Counter& counter) noexcept {
  return reinterpret_cast<std::uint32_t*>(&counter.value);
}

}  // namespace

void advance(Counter& counter, std::uint32_t value) noexcept {
  // Sequentially consistent on both sides (here and in sleep_on): either the
  // sleeper sees the new value, or this sees the sleeper and wakes it.
  counter.advanced_on.store(sched_getcpu() + 1, std::memory_order_relaxed);
  counter.value.store(value, std::memory_order_seq_cst);
  if (counter.sleepers.load(std::memory_order_seq_cst) != 0) wake(counter);
}

void wake(Counter& counter) noexcept {
  ::syscall(SYS_futex, word(counter), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool yield_until(Counter& counter, std::uint32_t target, const WaitPolicy& policy,
                 WaitState& state) noexcept {
  if (state.skip_yields.load(std::memory_order_relaxed) > 0) {
    state.skip_yields.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  for (int i = 0; i < policy.yields; ++i) {
    const auto before = std::chrono::steady_clock::now();
    sched_yield();
    // A yield that found the counter there is slow too when it took a time
    // slice (the peer mostly gets there in one): learned only from yields
    // that found it short, nearly every wait beside a CPU-bound process
    // paid one (docs/communicator.md). Not from a shorter one, which was a
    // peer's step on this core (n = 4 on 2 cores, all_reduce of 256 KiB:
    // 115-122 us against 79-102 us when 200 us taught it).
    const bool there = reached(counter.value.load(std::memory_order_acquire), target);
    const auto took = std::chrono::steady_clock::now() - before;
    if (policy.slow_yield.count() > 0 &&
        took >= (there ? std::max(policy.slow_yield, policy.time_slice) : policy.slow_yield) &&
        (policy.own_ranks == 0 || more_runnable_than(policy.own_ranks))) {
      state.skip_yields.store(policy.waits_without_yields, std::memory_order_relaxed);
      return there;
    }
    if (there) return true;
  }
  return false;
}

bool more_runnable_than(int own) noexcept {
  // Opened once per process; read from its start at each slow yield.
  static const int kLoadavg = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (kLoadavg < 0) return false;
  char text[128];
  const ssize_t got = ::pread(kLoadavg, text, sizeof text, 0);
  if (got <= 0) return false;
  const std::optional<int> running =
      runnable_in_loadavg(std::string_view(text, static_cast<std::size_t>(got)));
  return running && *running > own;
}

bool move_to_own_cpu(int cpu, int slot) noexcept {
  cpu_set_t allowed;
  if (slot < 0 || sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  const int count = CPU_COUNT(&allowed);
  if (count < 2) return false;
  int target = -1;
  for (int at = 0, seen = 0; at < CPU_SETSIZE; ++at) {
    if (CPU_ISSET(at, &allowed) && seen++ == slot % count) {
      target = at;
      break;
    }
  }
  if (target < 0 || target == cpu) return false;
  cpu_set_t own;
  CPU_ZERO(&own);
  CPU_SET(target, &own);
  if (sched_setaffinity(0, sizeof(own), &own) != 0) return false;
  sched_setaffinity(0, sizeof(allowed), &allowed);
  return true;
}

void sleep_on(Counter& counter, std::uint32_t seen, std::chrono::microseconds tick) noexcept {
  counter.sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (counter.value.load(std::memory_order_seq_cst) == seen) {
    timespec timeout{static_cast<time_t>(tick.count() / 1000000),
                     static_cast<long>(tick.count() % 1000000) * 1000};
    ::syscall(SYS_futex, word(counter), FUTEX_WAIT, seen, &timeout, nullptr, 0);
  }
  counter.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace cohort::detail::shm_backend
