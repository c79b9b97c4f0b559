// Counters in shared memory that one rank advances and the others wait on:
// a short spin, then sleep on a futex, so that more ranks than cores make
// progress instead of taking turns burning each other's time slices.
#pragma once

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include <sched.h>

namespace cohort::detail::shm_backend {

/// A counter alone on its cache line, with the number of ranks asleep on it
/// (its owner wakes them only when there are some) and the CPU its owner
/// last advanced it from: a rank that waits on that same CPU does not spin,
/// since the owner cannot run while it does (the scheduler puts a woken rank
/// where its waker runs: two ranks on one core each spun its whole budget,
/// 4096 polls or about 100 µs here, for every operation).
struct alignas(64) Counter {
  std::atomic<std::uint32_t> value{0};
  std::atomic<std::uint32_t> sleepers{0};
  std::atomic<int> advanced_on{0};  ///< that CPU + 1; 0 (a fresh segment's zeros): never
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

/// Whether `value` has reached `target` (counters wrap: compared as a distance).
inline bool reached(std::uint32_t value, std::uint32_t target) noexcept {
  return static_cast<std::int32_t>(value - target) >= 0;
}

/// Sets `counter` to `value` and wakes whoever sleeps on it.
void advance(Counter& counter, std::uint32_t value) noexcept;
/// Wakes whoever sleeps on `counter` (to look at something else: a peer lost).
void wake(Counter& counter) noexcept;
/// Sleeps on `counter` while it still holds `seen`, at most `tick`.
void sleep_on(Counter& counter, std::uint32_t seen, std::chrono::microseconds tick) noexcept;

/// How a rank waits: `spins` polls before the first sleep, then sleeps of
/// `tick`, after each of which the caller looks for a lost peer or the
/// deadline.
struct WaitPolicy {
  int spins = 2048;
  /// Then this many sched_yield()s, each followed by a poll: with more ranks
  /// than cores, the rank being waited for may be the one that runs next.
  int yields = 0;
  std::chrono::microseconds tick{5000};
  /// A yield that kept the rank off its core this long gave the core to
  /// another process for a time slice (a data loader, another job), not to
  /// a peer, which does its part of a round in microseconds: the next
  /// `waits_without_yields` waits then go from spinning straight to the
  /// futex, whose wake-up puts the rank back on its core at once. 0: never.
  std::chrono::nanoseconds slow_yield{200'000};
  /// A yield after which the counter was there is slow from this long: a
  /// time slice of another process (Linux's EEVDF gives 3 ms), not a
  /// peer's step on this core.
  std::chrono::nanoseconds time_slice{1'000'000};
  int waits_without_yields = 1024;
  /// Nonzero: a slow yield teaches that only while the kernel has more
  /// tasks runnable than this many (the job's ranks on this machine;
  /// /proc/loadavg). With more ranks than cores a peer's own step on this
  /// CPU (a copy of a megabyte) makes a yield slow too, and learning from
  /// it made every rank spin, then sleep: send/recv at n = 3 on 2 vCPUs
  /// from 256 KiB to 4 MiB at 0.47-0.87x Open MPI's speed, 0.90-1.04x with
  /// this and keep_yielding (2026-12-07). 0: any slow yield teaches.
  int own_ranks = 0;
  /// After the yields, look for a lost peer or the deadline and yield
  /// again, rather than sleep on the futex: with more ranks than cores a
  /// rank that sleeps leaves its CPU idle, and waking it (here, a vCPU the
  /// hypervisor halted) costs more than the peer's step it waited for. Waits
  /// that skip yields (a slow yield, above) still sleep.
  bool keep_yielding = false;
  /// Those waits poll this many times, not `spins`, before the futex: with
  /// another process on the core a rank that sleeps runs again only once
  /// that process's time slice ends, one that polls keeps its share of the
  /// core (n = 3 ranks on 2 CPUs beside a CPU-bound process on each).
  int busy_spins = 4096;
  /// This rank's index among the ranks of its machine (-1: it never
  /// moves). With a core per rank, a wait that finds the rank it waits for
  /// last ran on this rank's own CPU moves this rank to its own CPU
  /// (move_to_own_cpu), on the first such wait and every `move_every` after;
  /// with more ranks than cores, see `spread`.
  int own_cpu_slot = -1;
  int move_every = 64;
  /// With more ranks than cores (and own_cpu_slot set): the first wait and
  /// every `move_every`-th after move this rank to its slot's CPU wherever
  /// it runs, so that the ranks stay spread evenly over the CPUs. Left to
  /// itself the scheduler kept 3 of 4 ranks on one of 2 CPUs for a whole
  /// job in some jobs (broadcast of 4-64 KiB: 17-29 us a call against 7-15
  /// us spread 2 and 2, taskset per rank, 2026-12-02).
  bool spread = false;
  /// Whether every rank of the group has a CPU of its own: then a rank that
  /// waits for a peer it knows to be busy copying may poll until it is done
  /// (Group::send's single copy), where with more ranks than cores polling
  /// would take the CPU the peer needs.
  bool core_per_rank = true;
};

/// What a rank's waits learn about its core: waits left that skip yielding,
/// and waits that found their peer on their own CPU.
struct WaitState {
  std::atomic<int> skip_yields{0};
  std::atomic<int> on_shared_cpu{0};
};

/// Two ranks that the scheduler started on one CPU hand every operation over
/// through it (a 4 KiB all_reduce of 2 ranks: 5.6 µs against 0.4 µs on two
/// CPUs, here), and it does not part them on its own, since each sleeps or
/// yields while the other runs. This moves the calling thread, now on
/// `cpu`, to the `slot`-th of the CPUs it may use (counted round), and lets
/// it run anywhere it could before: its affinity set to that CPU (the
/// kernel moves it at once), then as it was. Each rank has its own slot, so
/// two that share a CPU do not both move, nor to the same one. False, and
/// nothing changed, when that CPU is `cpu` or the affinity cannot be read.
bool move_to_own_cpu(int cpu, int slot) noexcept;

/// The number of tasks runnable now in /proc/loadavg's text ("0.31 1.27
/// 2.06 2/108 30844": 2), or nothing when the text is not of that form.
inline std::optional<int> runnable_in_loadavg(std::string_view text) noexcept {
  std::size_t at = 0;  // past three averages and their spaces
  for (int field = 0; field < 3; ++field) {
    at = text.find(' ', at);
    if (at == std::string_view::npos) return std::nullopt;
    ++at;
  }
  int running = 0;
  const char* const end = text.data() + text.size();
  const auto [next, error] = std::from_chars(text.data() + at, end, running);
  if (error != std::errc() || next == end || *next != '/' || running < 0) return std::nullopt;
  return running;
}
/// Whether the kernel has more than `own` tasks runnable now; false when
/// /proc/loadavg cannot be read.
bool more_runnable_than(int own) noexcept;

/// Yields up to `policy.yields` times while `counter` is short of `target`:
/// whether it got there. Stops at the first slow yield (above).
bool yield_until(Counter& counter, std::uint32_t target, const WaitPolicy& policy,
                 WaitState& state) noexcept;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// The polls a rank on `cpu` spins on `counter` before it yields: none when
/// the counter's owner last advanced it from that CPU (see Counter);
/// `busy_spins` while another process shares the core (WaitState).
inline int spins_for(const Counter& counter, const WaitPolicy& policy, const WaitState& state,
                     int cpu) noexcept {
  if (counter.advanced_on.load(std::memory_order_relaxed) == cpu + 1) return 0;
  return state.skip_yields.load(std::memory_order_relaxed) > 0 ? policy.busy_spins : policy.spins;
}

/// Waits until `counter` reaches `target`. `between()` runs before each
/// sleep; it throws to give up (PeerLost, Timeout).
template <class Check>
void wait_until(Counter& counter, std::uint32_t target, const WaitPolicy& policy, WaitState& state,
                Check&& between) {
  const int cpu = sched_getcpu();
  int spins = spins_for(counter, policy, state, cpu);
  if ((spins == 0 || policy.spread) && policy.own_cpu_slot >= 0 &&
      state.on_shared_cpu.fetch_add(1, std::memory_order_relaxed) % policy.move_every == 0 &&
      move_to_own_cpu(cpu, policy.own_cpu_slot)) {
    // Now off the peer's CPU: a spin sees its advance without a sleep, whose
    // wake-up would put this rank back beside it.
    spins = policy.spins;
  }
  for (int i = 0; i < spins; ++i) {
    if (reached(counter.value.load(std::memory_order_acquire), target)) return;
    cpu_relax();
  }
  if (yield_until(counter, target, policy, state)) return;
  for (;;) {
    const std::uint32_t seen = counter.value.load(std::memory_order_acquire);
    if (reached(seen, target)) return;
    between();
    if (policy.keep_yielding && state.skip_yields.load(std::memory_order_relaxed) == 0) {
      if (yield_until(counter, target, policy, state)) return;
      continue;
    }
    sleep_on(counter, seen, policy.tick);
  }
}

}  // namespace cohort::detail::shm_backend
