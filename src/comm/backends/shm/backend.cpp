#include "comm/backend.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "comm/backends/shm/collectives.hpp"
#include "comm/backends/shm/factory.hpp"
#include "comm/backends/shm/group.hpp"
#include "comm/kit/group_store.hpp"
#include "comm/kit/host_identity.hpp"
#include "comm/kit/peers.hpp"
#include "comm/local_mailbox.hpp"
#include "core/config.hpp"
#include "core/cpus.hpp"
#include "core/strings.hpp"
#include "store/exchange.hpp"

namespace cohort::detail::shm_backend {
namespace {

using Duration = Backend::Duration;

// Defaults, measured on this project's 2-core machine (docs/communicator.md,
// "The shm backend"): every rank's slot, the size up to which reductions
// take one round (with a core per rank, two rounds were faster at every size
// from 1 KiB: each rank copies and reduces 1/n of the data instead of all
// of it), and each point-to-point channel. With more ranks than cores, one
// round up to 32 KiB (8 KiB until 2026-12-04): a round fewer to wait for a
// descheduled rank in. Three runs of each in turn (compare_allreduce
// --iters 100, shm): n = 3 beside a CPU-bound process per core took
// 12-34 µs at 16 KiB and 14-63 µs at 32 KiB in one round, 35-63 and
// 53-103 µs in two; idle at 16 KiB, n = 4 11-13 against 19-20 µs, n = 3
// 8-11 against 11-13 µs; at 64 KiB one round was no faster idle (n = 3:
// 18-26 against 19-20 µs).
constexpr std::size_t kKiB = 1024;
constexpr std::size_t kSlotBytes = 256 * kKiB;
constexpr std::size_t kOversubscribedSlotBytes = 1024 * kKiB;
constexpr std::size_t kSmallOversubscribedBytes = 32 * kKiB;
constexpr std::size_t kChannelBytes = 64 * kKiB;
// reduce in one round (every rank copies its data in, the root alone reduces
// them) up to these sizes, where all_reduce's bounds are 0 and 32 KiB: the
// root does all of the reducing, but the ranks meet once, not twice. In one
// job of settings_in_one_job (2026-12-07, 11 rounds), one round against
// two: n = 2 at 16 KiB 2.7 against 3.8 us (from 32 KiB single copies take
// reduce there); n = 3 at 64 and 128 KiB 19.4 and 28.2 against 21.9 and
// 36.0 us, n = 4 16.6 and 31.1 against 26.9 and 36.7 us, but at 256 KiB
// 71.0 against 58.7 (n = 3) and 68.9 against 58.0 us (n = 4).
constexpr std::size_t kReduceSmallBytes = 16 * kKiB;
constexpr std::size_t kReduceSmallOversubscribedBytes = 128 * kKiB;
// broadcast up to this size through the posts (Group::post), whose root
// waits for nobody while the ring has room, rather than in a round that
// needs every rank to have run since the last call. A message is posted
// and taken as a whole (one wait, one wake-up), however many entries it
// fills. On the Intel Xeon (2 vCPUs, 2026-12-07), n = 3 beside a CPU-bound
// process per core, reps of 2,000 broadcasts (`cohort bench allreduce --op
// broadcast`, four turns): 32 and 64 KiB took 14.8-19.0 and 26.1-28.5 us
// through the posts against 25.0-32.3 and 42.4-46.0 in rounds; from 128
// KiB the posts were no faster (256 KiB 106-185 against 103-110
// us). Idle, in one job (settings_in_one_job), posts up to 512 KiB over
// rounds: 1.00-1.10x at n = 3 up to 256 KiB, 1.12-1.36x at n = 4. Until
// then each entry was posted and taken on its own, and two entries or more
// were slower than the rounds idle (0.61-0.88x at n = 3 and 4), so the
// posts stopped at 16 KiB (docs/measurements/allreduce.md).
constexpr std::size_t kPostedBroadcastBytes = 64 * kKiB;
// Single copies (COHORT_SHM_SINGLE_COPY=auto): where they were faster than
// the rounds in one job, run after run (docs/communicator.md, "Single
// copies"), by bytes of each rank's block (Window). Outside these windows the
// rounds were as fast or faster: small blocks pay the two extra rounds and
// the system calls, large all_reduce/reduce_scatter/broadcast stream
// through slots that stay in cache, and ranks that wait for a core pay for
// every extra round.
constexpr Window kAlways{0, SIZE_MAX};
// Single copies (process_vm_readv/writev) are taken only when asked
// (COHORT_SHM_SINGLE_COPY=always): since the rounds got faster they lost in
// every collective, one by one, in one job (settings_in_one_job ... shm
// shm:COHORT_SHM_SINGLE_COPY=off), where auto had them: all_reduce 1.5-3.0x
// slower (2026-11-27 evening), all_gather 1.2-2.9x and broadcast 3.7-5.2x
// (that night), then on 2026-11-28 gather 1.35-4.8x (n = 2, 16 KiB-16 MiB)
// and 1.9-2.5x (n = 4, from 256 KiB), scatter 1.5-3.3x and 1.2-1.8x,
// reduce_scatter 2.0-3.4x (n = 2, 32 KiB-8 MiB), all_to_all 1.2-2.8x and
// 1.3-2.9x; compare_collectives lost to Open MPI in their windows.
// On 2026-12-02, with a core per rank (n = 2), they won again where Open
// MPI's own single copies had beaten the rounds in three compare_collectives
// runs: in one job, all_gather 1.23-2.34x faster from 16 KiB to 16 MiB,
// broadcast 1.15-2.05x from 16 KiB to 1 MiB (0.73-0.87x above); with more
// ranks than cores these two still lost. So auto took these two windows
// there, until the rounds' copies out of the slots into buffers from malloc
// stopped crawling (comm/copy.hpp, 2026-12-02). Then, in `cohort bench
// allreduce -n 2 --backend shm` with COHORT_SHM_SINGLE_COPY=off and auto in
// turn, twice, the rounds were faster for broadcast from 16 KiB to 1 MiB
// (1.6-2.9x) and for all_gather of 16 and 32 KiB a rank (2.8-6.6x), and
// single copies stayed ahead of Open MPI where the rounds were not, in
// compare_collectives: all_gather of 64 KiB a rank and more (rounds 0.62-0.92x
// of Open MPI in 5 of 12 sizes, single copies 1.03x at least). So auto takes
// single copies for all_gather from 64 KiB a rank, and for broadcast never.
constexpr Window kNever{};
constexpr Tuning::Windows kSingleCopiesWithACorePerRank{
    .all_reduce = kNever,
    .broadcast = kNever,
    .gather = kNever,
    .all_gather = {64 * kKiB, SIZE_MAX},
    .scatter = kNever,
    .reduce_scatter = kNever,
    .all_to_all = kNever,
};
// On an Intel Xeon (this project's machine on 2026-12-03: 2 vCPUs, 2 MiB of
// L2 each), with a core per rank, single copies of all_reduce were faster
// than the rounds from 32 KiB: in one job of settings_in_one_job (n = 2,
// shm:COHORT_SHM_SINGLE_COPY=off beside =always, 9 and 11 shuffled
// rounds), 1.37-2.28x from 32 KiB to 16 MiB and 1.07-1.35x to 256 MiB,
// 0.94-1.02x at 16 KiB, 0.47-0.76x below; the rounds had lost to Open MPI
// at 2-16 MiB in compare_allreduce (0.73-0.77x), single copies won there
// (1.42-1.61x). The AMD EPYC machine of the measurements above had them
// slower at every size (its copies at some distances between addresses
// crawl: comm/copy.hpp), so the window is the vendor's. The same job for
// broadcast: 1.08-1.73x from 64 KiB to 1 MiB, 0.72-0.88x above, 0.40-0.95x
// below; all_gather 1.28-2.47x from 16 KiB a rank up (0.96x at 8 KiB).
// gather, scatter and all_to_all from 16 KiB a block (2026-12-07, n = 2 in
// one job of settings_in_one_job beside MPI's own calls, 9 rounds): the
// rounds had lost to Open MPI from 64 KiB blocks (gather 0.48-0.93x, scatter
// 0.43-0.96x, all_to_all 0.40-0.86x), single copies were 1.31-3.13x (gather,
// each rank writing its block into the root's output), 1.11-1.81x and
// 0.98-1.13x Open MPI's speed from 16 KiB blocks.
constexpr Tuning::Windows kSingleCopiesWithACorePerRankOnIntel{
    .all_reduce = {32 * kKiB, SIZE_MAX},
    .broadcast = {64 * kKiB, 1024 * kKiB},
    .gather = {16 * kKiB, SIZE_MAX},
    .all_gather = {16 * kKiB, SIZE_MAX},
    .scatter = {16 * kKiB, SIZE_MAX},
    .reduce_scatter = kNever,
    .all_to_all = {16 * kKiB, SIZE_MAX},
};
// With more ranks than cores, all_reduce from 1 MiB: on 2026-12-02 the
// rounds (each a wake-up of every descheduled rank) lost to single copies
// beside a CPU-bound process per core, 1.25-2.84x at n = 4 from 1 MiB and
// 1.53-2.53x at n = 3 from 2 MiB (equal at 1 MiB), and on the idle machine
// single copies were as fast or faster from 1 MiB (n = 3: 1.08-1.70x;
// n = 4: 0.98-1.43x), in `cohort bench allreduce -n N --backend shm` with
// COHORT_SHM_SINGLE_COPY=off and =always in turn (docs/communicator.md).
// Since the waits changed (2026-12-04: a rank that finds another process on
// its core polls longer before it sleeps, waiting.hpp), the rounds won
// again, so nowhere since that afternoon: compare_allreduce with
// COHORT_SHM_SINGLE_COPY=auto (then from 1 MiB) and =off in turn, idle,
// n = 4 took 0.54-0.60 against 0.30-0.32 ms at 1 MiB (Open MPI 0.44-0.73 ms:
// auto was slower than it at 1-4 MiB), 65.6 against 39.3 ms at 128 MiB;
// n = 3 0.50-0.52 against 0.21-0.25 ms at 1 MiB, 5.0 against 1.7 ms at
// 8 MiB (auto 0.97x Open MPI there), 93.6 against 65.3 ms at 256 MiB.
// Beside a CPU-bound process per core, n = 3 1.11 against 0.60 ms at 1 MiB
// and 10.9 against 11.9 ms at 16 MiB; n = 4 1.39-1.41 against 0.79-0.87 ms
// at 1 MiB, but 4.0-4.3 against 4.4-5.7 ms at 4 MiB and 50.4 against
// 69.2 ms at 64 MiB (there single copies stay 1.0-1.4x faster, and both are
// far ahead of Open MPI beside the same processes: 17 ms at 1 MiB).
constexpr Tuning::Windows kSingleCopiesWithMoreRanksThanCores{
    .all_reduce = kNever,
    .broadcast = kNever,
    .gather = kNever,
    .all_gather = kNever,
    .scatter = kNever,
    .reduce_scatter = kNever,
    .all_to_all = kNever,
};
// The same Intel Xeon, more ranks than cores (n = 3 and 4 on 2 vCPUs,
// 2026-12-03): all_gather of 1 MiB a rank and more went faster in single
// copies than in the rounds, which had lost to Open MPI there in
// compare_collectives (n = 4: 0.48-0.92x from 1 MiB a rank). In `cohort
// bench allreduce --op all_gather --backend shm` with COHORT_SHM_SINGLE_COPY=auto
// and =always in turn, twice: n = 4 1.04-2.70x from 2 MiB a rank (0.96-1.38x
// at 1 MiB), n = 3 1.01-1.51x from 1.3 to 21 MiB a rank (0.97x at 43 and
// 85 MiB, one run), single copies faster than Open MPI in all but one of
// these cells (n = 4, 4 MiB a rank: 0.94x); in one job of
// settings_in_one_job, n = 3 1.06-1.35x and n = 4 0.99-1.25x from 2 MiB a
// rank. Broadcast: see automatic_single_copies. all_reduce from 512 KiB
// (1 MiB before, as on AMD): in 6 jobs of settings_in_one_job (n = 3 and 4,
// 2026-12-03, 14:35 UTC) single copies were 1.15-1.50x as fast as the
// rounds at 512 KiB in every one, at 256 KiB 0.83-1.52x, at 128 KiB
// 1.02-1.22x, 64 KiB 0.78-0.99x; the rounds at 512 KiB of n = 4 had lost to
// Open MPI in compare_allreduce (0.84x). gather from 64 KiB a block,
// scatter and all_to_all from 80 KiB (2026-12-07, n = 3 and 4 in one job of
// settings_in_one_job, 9 rounds): there single copies were faster than the
// rounds at both n (gather at 256 KiB a block: 1.71x Open MPI's speed at
// n = 4, the rounds 0.82x); below, the rounds were (all_to_all of 64 KiB
// blocks at n = 4: the rounds 0.90x, single copies 0.76x), but for one cell
// the bound gives away (all_to_all of 43 KiB blocks at n = 3: the rounds
// 0.83x, single copies 0.95x). all_to_all from 40 KiB blocks since the
// waits changed again (2026-12-07 evening: waiting ranks keep yielding): in
// jobs of settings_in_one_job on 2026-12-08 (21 rounds, beside MPI_Alltoall)
// the rounds lost where single copies kept up: 48 KiB blocks at n = 4 0.65-
// 0.68x against 0.93-0.96x, 64 KiB at n = 3 0.66-0.78x against 0.95-1.03x
// and at n = 4 0.62-0.83x against 0.98-1.03x; 43 KiB at n = 3 0.88-0.94x
// against 0.94-0.99x; at 40 KiB (n = 4) neither led (0.87, 0.99x against
// 0.92, 0.89x); from 32 KiB down the rounds were faster (0.92-1.10x against
// 0.81-0.87x at n = 4).
constexpr Tuning::Windows kSingleCopiesWithMoreRanksThanCoresOnIntel{
    .all_reduce = {512 * kKiB, SIZE_MAX},
    .broadcast = kNever,
    .gather = {64 * kKiB, SIZE_MAX},
    .all_gather = {1024 * kKiB, SIZE_MAX},
    .scatter = {80 * kKiB, SIZE_MAX},
    .reduce_scatter = kNever,
    .all_to_all = {40 * kKiB, SIZE_MAX},
};
// Buffers in shared memory (Communicator::allocate): where they were faster
// than the protocols above in one job (docs/communicator.md, "Buffers in
// shared memory"). Below these sizes the round that compares places and the
// one that keeps the buffers still cost more than the copies they save:
// most of all with more ranks than cores, where every round waits for a
// descheduled rank.
constexpr Tuning::Windows kSharedMemoryWithACorePerRank{
    .all_reduce = kAlways,
    .broadcast = {8 * kKiB, SIZE_MAX},
    .gather = kAlways,
    .all_gather = kAlways,
    .scatter = {8 * kKiB, SIZE_MAX},
    .reduce_scatter = {8 * kKiB, SIZE_MAX},
    .all_to_all = kAlways,
};
constexpr Tuning::Windows kSharedMemoryOversubscribed{
    .all_reduce = kAlways,
    .broadcast = {128 * kKiB, SIZE_MAX},
    .gather = {64 * kKiB, SIZE_MAX},
    .all_gather = {64 * kKiB, SIZE_MAX},
    .scatter = {64 * kKiB, SIZE_MAX},
    .reduce_scatter = {8 * kKiB, SIZE_MAX},
    .all_to_all = {8 * kKiB, SIZE_MAX},
};

// COHORT_SHM_SINGLE_COPY: off, auto (where measured faster), always (every
// collective that has them; an error where they cannot work).
enum class SingleCopy { off, automatic, always };

SingleCopy single_copy_from_env() {
  const char* text = std::getenv("COHORT_SHM_SINGLE_COPY");
  const std::string_view value = text == nullptr ? "auto" : text;
  if (value == "off" || value == "0") return SingleCopy::off;
  if (value == "auto" || value.empty()) return SingleCopy::automatic;
  if (value == "always") return SingleCopy::always;
  throw Error(
      cat("COHORT_SHM_SINGLE_COPY='", value, "' is not off, auto or always; fix or unset it"));
}

// What every rank of a group must agree on: rank 0's settings.
struct Settings {
  bool oversubscribed = false;  // more ranks than the CPUs they may run on
  // Whether waits keep this rank on its slot's CPU (WaitPolicy::spread): with
  // more ranks than cores, when the ranks split evenly over the CPUs. Each
  // rank's own choice (not agreed on). At n = 4 on 2 CPUs it took the place
  // of 3 and 1 the scheduler kept in some jobs; at n = 3 it made broadcast
  // of 256 KiB-4 MiB 1.3-2.7x slower (compare_collectives, 2026-12-02).
  bool spread = false;
  std::size_t slot_bytes = kSlotBytes;
  std::size_t channel_bytes = kChannelBytes;
  SingleCopy single_copy = SingleCopy::automatic;
  Tuning tuning;
};

// Where COHORT_SHM_SINGLE_COPY=auto takes single copies: the windows
// measured on this CPU's vendor, with a core per rank or more ranks than
// cores. With more ranks than cores on Intel that do not split evenly over
// the CPUs (n = 3 on 2), broadcast too from 8 MiB: in one job of
// settings_in_one_job the rounds took 1.7-2.7x as long as single copies
// from 8 to 64 MiB (0.99x at 4 MiB), and Open MPI as long as single copies;
// at n = 4, split 2 and 2, the rounds were as fast or faster at every size.
Tuning::Windows automatic_single_copies(const Settings& settings) {
  const bool intel = cpu_vendor() == "GenuineIntel";
  if (!settings.oversubscribed)
    return intel ? kSingleCopiesWithACorePerRankOnIntel : kSingleCopiesWithACorePerRank;
  if (!intel) return kSingleCopiesWithMoreRanksThanCores;
  Tuning::Windows chosen = kSingleCopiesWithMoreRanksThanCoresOnIntel;
  if (!settings.spread) chosen.broadcast = {8 * kKiB * kKiB, SIZE_MAX};
  return chosen;
}

// broadcast's rounds, each a copy into the root's slot and one out of it by
// every other rank: at most half a core's L2 cache, so that a round's
// piece of the slot and of the buffer it is copied to or from stay in that
// cache together (0 where the L2 is not known: a whole slot, as where a
// slot is that small already). On an AMD EPYC of 1 MiB of L2 a core
// (2026-12-05, more ranks than cores: 1 MiB slots), compare_collectives
// --one-job had broadcast at n = 3 slower than Open MPI from 1 MiB in
// every round (0.43-0.59x), and at n = 4 at 512 KiB (0.83x); in one job of
// settings_in_one_job, rounds of 512 KiB were 1.0-2.1x as fast as the
// slot's 1 MiB at n = 3 (1.9-2.1x from 1 to 8 MiB) and 1.1-1.6x at n = 4,
// from 128 KiB to 64 MiB (docs/communicator.md). The Intel Xeon's 2 MiB of
// L2 leaves its 1 MiB rounds as they were.
std::size_t broadcast_chunk_bytes(std::size_t l2_bytes) {
  return l2_bytes / 2 / 64 * 64;
}

// This rank's settings from its environment, for a group of `size` ranks
// that may run on `cpus` CPUs together, beside which `busy` ranks of the job
// run there in all (hier's host group on one machine's namespaces: the
// other "hosts" share the CPUs).
Settings local_settings(int size, int busy, int cpus) {
  Settings settings;
  // More ranks than cores: every round waits for descheduled ranks, so
  // fewer, larger rounds win, and a spinning rank holds the core its peer
  // needs.
  settings.oversubscribed = std::max(size, busy) > cpus;
  settings.spread = settings.oversubscribed && cpus > 0 && std::max(size, busy) % cpus == 0;
  const std::size_t slot = settings.oversubscribed ? kOversubscribedSlotBytes : kSlotBytes;
  settings.slot_bytes =
      std::max<std::size_t>(4096, bytes_from_env("COHORT_SHM_SLOT_BYTES", slot) / 64 * 64);
  Tuning& tuning = settings.tuning;
  tuning.small_bytes = bytes_from_env("COHORT_SHM_SMALL_BYTES",
                                      settings.oversubscribed ? kSmallOversubscribedBytes : 0);
  tuning.broadcast_chunk_bytes = broadcast_chunk_bytes(l2_cache_bytes());
  tuning.reduce_small_bytes =
      bytes_from_env("COHORT_SHM_REDUCE_SMALL_BYTES",
                     settings.oversubscribed ? kReduceSmallOversubscribedBytes : kReduceSmallBytes);
  tuning.posted_broadcast_bytes =
      std::min(bytes_from_env("COHORT_SHM_POSTED_BROADCAST_BYTES", kPostedBroadcastBytes),
               Group::kMaxPostBytes);
  // n² channels: at most 16 MiB of them in all (64 KiB each up to 16 ranks).
  const auto pairs = static_cast<std::size_t>(size) * static_cast<std::size_t>(size);
  settings.channel_bytes =
      std::clamp<std::size_t>(16 * kKiB * kKiB / pairs / 64 * 64, 4 * kKiB, kChannelBytes);
  settings.single_copy = single_copy_from_env();
  if (settings.single_copy == SingleCopy::always) {
    tuning.single_copies = {kAlways, kAlways, kAlways, kAlways, kAlways, kAlways, kAlways};
  } else if (settings.single_copy == SingleCopy::automatic) {
    tuning.single_copies = automatic_single_copies(settings);
  }  // else none: off
  return settings;
}

// The CPUs the group's ranks may run on together (rank 0 learns it; the
// others get 0): each rank's own affinity mask says too little, since ranks
// bound to a core each (mpirun, srun --cpu-bind) see one CPU apiece.
int group_cpus(Store* store, int rank, int size, Duration timeout) {
  if (store == nullptr) return usable_cpus();
  store->set(cat("shm/cpus/", rank), affinity_list());
  if (rank != 0) return 0;
  return cpus_in_lists(
      store->multi_get(ranked_keys("shm/cpus", static_cast<std::size_t>(size)), timeout));
}

// Every window of `copies`, in one order for writing and reading them.
template <class Copies>
auto windows(Copies& copies) {
  return std::array{&copies.all_reduce, &copies.broadcast, &copies.gather,
                    &copies.all_gather, &copies.scatter,   &copies.reduce_scatter,
                    &copies.all_to_all};
}

// Rank 0's settings. Every rank reads its own environment first, so that a
// wrong value fails every rank at once, not only rank 0 (the others would
// wait for its settings until the timeout).
Settings agree_on_settings(Store* store, int rank, int size, int busy, Duration timeout) {
  const int cpus = group_cpus(store, rank, size, timeout);
  Settings settings = local_settings(size, busy, rank == 0 ? cpus : usable_cpus());
  Tuning& tuning = settings.tuning;
  if (rank == 0) {
    if (store != nullptr) {
      std::ostringstream text;
      text << settings.slot_bytes << ' ' << settings.channel_bytes << ' '
           << (settings.oversubscribed ? 1 : 0) << ' ' << static_cast<int>(settings.single_copy)
           << ' ' << tuning.small_bytes << ' ' << tuning.reduce_small_bytes << ' '
           << tuning.broadcast_chunk_bytes << ' ' << tuning.posted_broadcast_bytes;
      for (const Window* window : windows(tuning.single_copies))
        text << ' ' << window->min << ' ' << window->max;
      store->set("shm/settings", text.str());
    }
    return settings;
  }
  int single_copy = 0;
  std::istringstream text(store->get("shm/settings", timeout));
  text >> settings.slot_bytes >> settings.channel_bytes >> settings.oversubscribed >> single_copy >>
      tuning.small_bytes >> tuning.reduce_small_bytes >> tuning.broadcast_chunk_bytes >>
      tuning.posted_broadcast_bytes;
  for (Window* window : windows(tuning.single_copies))
    text >> window->min >> window->max;
  settings.single_copy = static_cast<SingleCopy>(single_copy);
  return settings;
}

class ShmBackend final : public Backend {
 public:
  ShmBackend(std::shared_ptr<Store> store, std::unique_ptr<Group> group, Tuning tuning,
             int machine_ranks, Duration timeout)
      : store_(std::move(store)),
        group_(std::move(group)),
        tuning_(tuning),
        machine_ranks_(machine_ranks),
        timeout_(timeout) {}

  int rank() const noexcept override { return group_->rank(); }
  int size() const noexcept override { return group_->size(); }
  std::string_view name() const noexcept override { return "shm"; }
  Duration default_timeout() const noexcept override { return timeout_; }

  void all_reduce(Buffer data, ReduceOp op, Duration timeout) override {
    collective("all_reduce", timeout, [&](const Call& call) {
      shm_backend::all_reduce(*group_, tuning_, data, op, call);
    });
  }
  void broadcast(Buffer data, int root, Duration timeout) override {
    collective("broadcast", timeout, [&](const Call& call) {
      shm_backend::broadcast(*group_, tuning_, data, root, call);
    });
  }
  void reduce(Buffer data, ReduceOp op, int root, Duration timeout) override {
    collective("reduce", timeout, [&](const Call& call) {
      shm_backend::reduce(*group_, tuning_, data, op, root, call);
    });
  }
  void all_gather(Buffer input, Buffer output, Duration timeout) override {
    collective("all_gather", timeout, [&](const Call& call) {
      shm_backend::all_gather(*group_, tuning_, input, output, call);
    });
  }
  void gather(Buffer input, Buffer output, int root, Duration timeout) override {
    collective("gather", timeout, [&](const Call& call) {
      shm_backend::gather(*group_, tuning_, input, output, root, call);
    });
  }
  void scatter(Buffer input, Buffer output, int root, Duration timeout) override {
    collective("scatter", timeout, [&](const Call& call) {
      shm_backend::scatter(*group_, tuning_, input, output, root, call);
    });
  }
  void reduce_scatter(Buffer input, Buffer output, ReduceOp op, Duration timeout) override {
    collective("reduce_scatter", timeout, [&](const Call& call) {
      shm_backend::reduce_scatter(*group_, tuning_, input, output, op, call);
    });
  }
  void all_to_all(Buffer input, Buffer output, Duration timeout) override {
    collective("all_to_all", timeout, [&](const Call& call) {
      shm_backend::all_to_all(*group_, tuning_, input, output, call);
    });
  }
  void barrier(Duration timeout) override {
    collective("barrier", timeout, [&](const Call& call) { shm_backend::barrier(*group_, call); });
  }

  void send(Buffer data, int peer, int tag, Duration timeout) override {
    if (peer == rank()) return mailbox_.post(data, tag);
    guarded("send", timeout,
            [&](const Call& call) { group_->send(data.data, data.bytes(), peer, tag, call); });
  }
  void recv(Buffer data, int peer, int tag, Duration timeout) override {
    if (peer == rank()) return mailbox_.take(data, tag, timeout);
    guarded("recv", timeout,
            [&](const Call& call) { group_->recv(data.data, data.bytes(), peer, tag, call); });
  }

  std::unique_ptr<Backend> split(int color, int key) override;

  std::shared_ptr<void> allocate(std::size_t bytes, Duration timeout) override {
    std::shared_ptr<void> memory;
    guarded("allocate", timeout, [&](const Call& call) {
      memory = group_->memory().allocate(store_, rank(), size(), bytes, group_->peers().pids(),
                                         call.timeout);
    });
    return memory;
  }

 private:
  // A collective that stops part-way (a lost peer, a timeout) leaves the
  // group's rounds out of step: every later call fails at once, saying why.
  template <class Body>
  void collective(const char* what, Duration timeout, Body&& body) {
    if (!broken_.empty()) {
      if (lost_rank_ >= 0) throw PeerLost(cat(what, ": ", broken_), lost_rank_);
      throw Timeout(cat(what, ": this group is unusable: ", broken_));
    }
    guarded(what, timeout, [&](const Call& call) {
      try {
        body(call);
      } catch (const Timeout& error) {
        broken_ = cat("an earlier call stopped part-way (", error.what(), ")");
        throw;
      }
    });
  }

  template <class Body>
  void guarded(const char* what, Duration timeout, Body&& body) {
    if (!broken_.empty() && lost_rank_ >= 0) throw PeerLost(cat(what, ": ", broken_), lost_rank_);
    try {
      body(Call(what, timeout));
    } catch (const PeerLost& error) {
      lost_rank_ = error.peer_rank();
      broken_ = error.what();
      throw;
    }
  }

  std::shared_ptr<Store> store_;
  std::unique_ptr<Group> group_;
  Tuning tuning_;
  int machine_ranks_;  // BackendContext::machine_ranks, for split's subgroups
  Duration timeout_;
  LocalMailbox mailbox_;
  int splits_ = 0;
  std::string broken_;
  int lost_rank_ = -1;
};

// Connects `size` ranks through `store`: who they are (kit/peers.hpp),
// rank 0's settings, the segment. That every rank runs on this host was
// settled before: unviable_because judged the exchanged host identities,
// and a split's subgroup holds some of a group's ranks.
std::unique_ptr<Backend> connect(std::shared_ptr<Store> store, int rank, int size,
                                 int machine_ranks, Duration timeout) {
  if (size > 1) Peers::publish(*store, rank);
  Peers peers =
      size == 1
          ? Peers(0, {Peers::entry()})  // a group of one: no one to meet
          : Peers(*store, rank, std::vector<std::string>(static_cast<std::size_t>(size)), timeout);
  const std::vector<long> pids = peers.pids();
  Settings settings =
      agree_on_settings(size == 1 ? nullptr : store.get(), rank, size, machine_ranks, timeout);
  // From rank 0's count of CPUs, so the same on every rank.
  settings.tuning.shared_memory =
      settings.oversubscribed ? kSharedMemoryOversubscribed : kSharedMemoryWithACorePerRank;
  Segment segment = Segment::share(
      *store, rank, size, Group::segment_bytes(size, settings.slot_bytes, settings.channel_bytes),
      pids, timeout);
  WaitPolicy policy;
  policy.spins =
      static_cast<int>(bytes_from_env("COHORT_SHM_SPINS", settings.oversubscribed ? 64 : 4096));
  policy.yields = static_cast<int>(bytes_from_env("COHORT_SHM_YIELDS", 64));
  policy.slow_yield = std::chrono::microseconds(
      static_cast<long long>(bytes_from_env("COHORT_SHM_SLOW_YIELD_US", 200)));
  policy.busy_spins = static_cast<int>(bytes_from_env("COHORT_SHM_BUSY_SPINS", 4096));
  // With more ranks than cores, yield rather than sleep, and take a slow
  // yield for another process's time slice only when the kernel runs more
  // tasks than the job has here (waiting.hpp). COHORT_SHM_KEEP_YIELDING=0:
  // the waits as before 2026-12-07, for comparison.
  if (settings.oversubscribed && bytes_from_env("COHORT_SHM_KEEP_YIELDING", 1) != 0) {
    policy.keep_yielding = true;
    policy.own_ranks = std::max(size, machine_ranks);
  }
  policy.own_cpu_slot = rank;
  policy.spread = settings.spread;
  policy.core_per_rank = !settings.oversubscribed;
  auto group = std::make_unique<Group>(std::move(segment), rank, size, std::move(peers),
                                       settings.slot_bytes, settings.channel_bytes, policy);
  if (size > 1 && settings.single_copy != SingleCopy::off) {
    const int failed = group->probe_single_copy(Call("connecting", timeout));
    if (failed >= 0 && settings.single_copy == SingleCopy::always) {
      throw Error(cat("shm: COHORT_SHM_SINGLE_COPY=always, but rank ", failed,
                      " cannot read or write another rank's memory with process_vm_readv/writev "
                      "(not permitted "
                      "here: Yama's ptrace_scope, a seccomp filter, or a process that is not "
                      "dumpable); unset COHORT_SHM_SINGLE_COPY to copy through the segment"));
    }
  }
  return std::make_unique<ShmBackend>(std::move(store), std::move(group), settings.tuning,
                                      machine_ranks, timeout);
}

std::unique_ptr<Backend> ShmBackend::split(int color, int key) {
  const std::optional<Subgroup> subgroup =
      plan_split(store_, ++splits_, rank(), size(), color, key, timeout_);
  if (!subgroup) return nullptr;
  return connect(subgroup->store, subgroup->rank, subgroup->size, machine_ranks_, timeout_);
}

}  // namespace

std::string unviable_because(const BackendContext& context) {
  const LaunchInfo& info = *context.info;
  const int size = info.world_size.value;
  if (size <= 1) return {};
  if (!context.store) return "it needs the job's store to meet its ranks";
  if (!context.hosts.empty()) {
    const std::string& here = context.hosts[static_cast<std::size_t>(info.rank.value)];
    std::vector<std::string> elsewhere;
    for (std::size_t r = 0; r < context.hosts.size(); ++r) {
      if (context.hosts[r] != here) elsewhere.push_back(std::to_string(r));
    }
    if (elsewhere.empty()) return {};
    if (elsewhere.size() > 8) elsewhere.resize(8), elsewhere.emplace_back("...");
    return cat("rank(s) ", join(elsewhere, ", "), " run on another host than this one (",
               host_name_of(here), "): it serves the ranks of one host");
  }
  // Not exchanged yet (choosing without connecting): the launcher's word.
  if (info.local_world_size.value == size || info.num_nodes.value == 1) return {};
  if (info.local_world_size.value != kUnknown) {
    return cat("this node has ", info.local_world_size.value, " of the ", size,
               " ranks: it serves the ranks of one host");
  }
  return "whether every rank runs on this host is known only once the ranks meet";
}

std::unique_ptr<Communicator> create(const BackendContext& context) {
  const int size = context.info->world_size.value;
  const int rank = size <= 1 ? 0 : context.info->rank.value;
  if (!context.store && size > 1) throw Error("shm: the ranks need the job's store to meet");
  return std::make_unique<Communicator>(
      connect(context.store, rank, std::max(size, 1), context.machine_ranks, context.timeout));
}

}  // namespace cohort::detail::shm_backend
