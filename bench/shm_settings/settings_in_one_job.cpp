// Collective settings measured against each other in one job. On a shared,
// noisy machine two runs can differ by 2x, and a comparison across runs
// says more about the machine than about the settings: here every setting
// gets its own communicator in the same processes, and each round times
// them one after another in a shuffled order, so all see the same machine.
//
//   settings_in_one_job [--op OP] [--sizes 256K:64M] [--rounds 21]
//                       [--cold BYTES] [--whole] [--json FILE] CONFIG...
//
// A CONFIG is BACKEND[:VAR=VALUE,...]: a communicator of that backend made
// with those variables set while it connects (the shm backend reads its
// settings then), e.g. shm:COHORT_SHM_SINGLE_COPY=off, shm, mpi (Open MPI's
// own collectives through cohort's mpi backend: start it with mpirun then),
// mpi-raw (MPI's own call made directly, as bench/allreduce/allreduce_mpi.c
// makes it, with MPI initialised by this program at MPI_THREAD_SINGLE, or at
// MPI_THREAD_MULTIPLE when `mpi` is listed too). The item `allocate` in the
// list (shm:allocate) puts the operation's buffers in the communicator's
// own memory (Communicator::allocate). Start it with `cohort run -n
// N` or `mpirun -np N`. OP: all_reduce (the default, float sum in place),
// broadcast, reduce (sum, to rank 0), gather and scatter (to and from rank
// 0), all_gather, reduce_scatter (sum), all_to_all, send_recv (a ring, as
// `cohort bench allreduce --op send_recv` makes it). Rank 0 prints, per
// size (all_reduce, broadcast, reduce and send_recv: bytes of the buffer;
// the others: bytes of each rank's block, n of which make the larger
// buffer; with --whole, bytes of the larger buffer as `cohort bench
// allreduce --op` counts them, each block 1/n of it), the median over the
// rounds of each config's time per operation (a round's time: the slowest
// rank's mean over a few back-to-back operations), and in brackets the
// first config's time over this one's (above 1x: this one is faster).
// --cold BYTES: every timed operation starts from cold caches, as DDP's
// all-reduce after backward does: each rank first writes BYTES of other
// memory (say 4x the last-level cache), untimed, and the ranks meet at a
// barrier. --json FILE: rank 0 also writes every config's time of every
// round, per size, to FILE.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <cohort/cohort.hpp>

#include "comm/backend_context.hpp"
#include "comm/registry.hpp"
#include "core/strings.hpp"

#ifdef COHORT_BENCH_WITH_MPI
#include <mpi.h>
#endif

namespace {

using cohort::Buffer;
using cohort::Communicator;
using cohort::ReduceOp;

constexpr const char* kRawMpi = "mpi-raw";

struct Config {
  std::string text;
  std::unique_ptr<Communicator> comm;  // none for mpi-raw
  std::vector<double> times;
  bool allocated = false;  // the buffers from comm->allocate
  // For the size under way: each of the operation's buffers, in the size's
  // vectors (which every config without `allocate` uses) or in this
  // config's memory from comm->allocate.
  std::span<float> data, whole, received;
  std::vector<std::shared_ptr<void>> memory;
};

using Saved = std::vector<std::pair<std::string, std::optional<std::string>>>;

// Sets each VAR=VALUE of `assignments` ("A=1,B=2"); returns what to undo.
Saved set_variables(const std::string& assignments) {
  Saved previous;
  for (const std::string& item : cohort::detail::split_at(assignments, ',')) {
    const std::size_t equals = item.find('=');
    if (equals == std::string::npos) continue;
    const std::string name = item.substr(0, equals);
    const char* old = std::getenv(name.c_str());
    previous.emplace_back(name, old == nullptr ? std::nullopt : std::optional<std::string>(old));
    setenv(name.c_str(), item.substr(equals + 1).c_str(), 1);
  }
  return previous;
}

void restore_variables(const Saved& previous) {
  for (const auto& [name, value] : previous) {
    if (value) {
      setenv(name.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
}

std::unique_ptr<Communicator> connect(cohort::World& world, const std::string& config, int index) {
  const std::size_t colon = config.find(':');
  const std::string backend = config.substr(0, colon);
  const auto previous =
      set_variables(colon == std::string::npos ? std::string() : config.substr(colon + 1));
  cohort::detail::BackendContext context;
  context.info = &world.info();
  context.timeout = std::chrono::minutes(2);
  const std::shared_ptr<cohort::Store> store(std::shared_ptr<cohort::Store>(), &world.store());
  context.store =
      std::make_shared<cohort::PrefixStore>(cohort::detail::cat("settings/", index), store);
  std::unique_ptr<Communicator> comm = cohort::detail::create_communicator(context, backend);
  restore_variables(previous);
  return comm;
}

// mpi-raw's calls: MPI's own collective for `op` on the buffers a
// communicator gets (as Open MPI's columns of bench/compare_allreduce and
// compare_collectives make them), and the barrier and slowest mean it is
// timed with, as allreduce_mpi.c times it, and MPI's end. Without MPI they are never
// called: start_mpi_for refuses mpi-raw first.
#ifdef COHORT_BENCH_WITH_MPI
void run_raw_mpi(const std::string& op, std::span<float> data, std::span<float> whole,
                 std::span<float> received) {
  const int count = static_cast<int>(data.size());
  if (op == "all_reduce") {
    MPI_Allreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else if (op == "broadcast") {
    MPI_Bcast(data.data(), count, MPI_FLOAT, 0, MPI_COMM_WORLD);
  } else if (op == "all_gather") {
    MPI_Allgather(data.data(), count, MPI_FLOAT, whole.data(), count, MPI_FLOAT, MPI_COMM_WORLD);
  } else if (op == "reduce_scatter") {
    MPI_Reduce_scatter_block(whole.data(), data.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else if (op == "scatter") {
    MPI_Scatter(whole.data(), count, MPI_FLOAT, data.data(), count, MPI_FLOAT, 0, MPI_COMM_WORLD);
  } else if (op == "gather") {
    MPI_Gather(data.data(), count, MPI_FLOAT, whole.data(), count, MPI_FLOAT, 0, MPI_COMM_WORLD);
  } else if (op == "reduce") {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : data.data(), data.data(), count, MPI_FLOAT, MPI_SUM, 0,
               MPI_COMM_WORLD);
  } else if (op == "send_recv") {
    int rank = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const int next = (rank + 1) % n, previous = (rank + n - 1) % n;
    if (rank % 2 == 0) MPI_Send(data.data(), count, MPI_FLOAT, next, 0, MPI_COMM_WORLD);
    MPI_Recv(received.data(), count, MPI_FLOAT, previous, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank % 2 != 0) MPI_Send(data.data(), count, MPI_FLOAT, next, 0, MPI_COMM_WORLD);
  } else {
    MPI_Alltoall(whole.data(), count, MPI_FLOAT, received.data(), count, MPI_FLOAT, MPI_COMM_WORLD);
  }
}

void raw_mpi_barrier() {
  MPI_Barrier(MPI_COMM_WORLD);
}

double raw_mpi_slowest(double mine) {
  MPI_Allreduce(MPI_IN_PLACE, &mine, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return mine;
}

void finalize_mpi() {
  MPI_Finalize();
}
#else
void run_raw_mpi(const std::string&, std::span<float>, std::span<float>, std::span<float>) {}
void raw_mpi_barrier() {}
double raw_mpi_slowest(double mine) {
  return mine;
}
void finalize_mpi() {}
#endif

// Whether MPI was started here for mpi-raw (then it is finalized here too).
bool start_mpi_for(const std::vector<Config>& configs) {
  const auto listed = [&](const std::string& name) {
    return std::any_of(configs.begin(), configs.end(), [&](const Config& config) {
      return config.text.substr(0, config.text.find(':')) == name;
    });
  };
  if (!listed(kRawMpi)) return false;
#ifdef COHORT_BENCH_WITH_MPI
  // cohort's mpi backend needs MPI_THREAD_MULTIPLE (its default); alone,
  // MPI's default level, at which Open MPI takes no locks.
  const int level = listed("mpi") ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE;
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, level, &provided) != MPI_SUCCESS) {
    throw cohort::Error("settings_in_one_job: MPI_Init_thread failed; start it under mpirun");
  }
  return true;
#else
  throw cohort::Error(
      "settings_in_one_job: mpi-raw needs MPI, and this build has none (install libopenmpi-dev "
      "and configure again)");
#endif
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// One size's entry of --json: every config's time per round, in µs.
nlohmann::json json_size(std::size_t bytes, const std::vector<Config>& configs) {
  nlohmann::json rounds = nlohmann::json::object();
  for (const Config& config : configs)
    rounds[config.text] = config.times;
  return {{"bytes", bytes}, {"rounds_us", rounds}};
}

void write_json(const std::string& path, const nlohmann::json& run) {
  std::ofstream file(path);
  file << run.dump(1) << "\n";
  if (!file) throw cohort::Error(cohort::detail::cat("settings_in_one_job: cannot write ", path));
}

}  // namespace

int main(int argc, char** argv) {
  std::string op = "all_reduce";
  std::size_t smallest = 256 * 1024;
  std::size_t largest = 64 * 1024 * 1024;
  int rounds = 21;
  std::size_t cold = 0;
  std::string json_path;
  bool whole_sizes = false;
  std::vector<Config> configs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--op" && i + 1 < argc) {
      op = argv[++i];
    } else if (arg == "--sizes" && i + 1 < argc) {
      const std::string sizes = argv[++i];
      const std::size_t colon = sizes.find(':');
      smallest = cohort::detail::parse_byte_size(sizes.substr(0, colon)).value_or(0);
      largest = colon == std::string::npos
                    ? smallest
                    : cohort::detail::parse_byte_size(sizes.substr(colon + 1)).value_or(0);
    } else if (arg == "--cold" && i + 1 < argc) {
      cold = cohort::detail::parse_byte_size(argv[++i]).value_or(SIZE_MAX);  // SIZE_MAX: refused
    } else if (arg == "--whole") {
      whole_sizes = true;
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      const std::size_t colon = arg.find(':');
      bool allocated = false;
      if (colon != std::string::npos) {
        for (const std::string& item : cohort::detail::split_at(arg.substr(colon + 1), ','))
          allocated = allocated || item == "allocate";
      }
      configs.push_back({arg, nullptr, {}, allocated, {}, {}, {}, {}});
    }
  }
  const bool known_op = op == "all_reduce" || op == "all_gather" || op == "broadcast" ||
                        op == "reduce" || op == "reduce_scatter" || op == "scatter" ||
                        op == "gather" || op == "all_to_all" || op == "send_recv";
  if (configs.empty() || !known_op || smallest < 4 || largest < smallest || cold == SIZE_MAX) {
    std::fprintf(
        stderr,
        "usage: settings_in_one_job [--op all_reduce|broadcast|reduce|all_gather|"
        "reduce_scatter|gather|scatter|all_to_all|send_recv] [--sizes 256K:64M] "
        "[--rounds 21] [--cold BYTES] [--whole] [--json FILE] BACKEND[:VAR=VALUE,...]...\n");
    return 2;
  }
  try {
    const bool own_mpi = start_mpi_for(configs);
    cohort::World world = cohort::init();
    for (std::size_t c = 0; c < configs.size(); ++c) {
      if (configs[c].text != kRawMpi)
        configs[c].comm = connect(world, configs[c].text, static_cast<int>(c));
    }
    const int n = world.size();
    if (world.rank() == 0) {
      std::printf("# %s, %d ranks: time per operation (us), median of %d shuffled rounds%s\n",
                  op.c_str(), n, rounds, cold > 0 ? ", caches cold" : "");
      std::printf("%12s", "bytes");
      for (const Config& config : configs)
        std::printf("  %s", config.text.c_str());
      std::printf("\n");
    }
    std::mt19937 shuffle(12345);  // the same order on every rank
    std::vector<unsigned char> evict(cold);
    std::vector<std::string> names;
    for (const Config& config : configs)
      names.push_back(config.text);
    nlohmann::json run = {{"op", op},         {"ranks", world.size()},
                          {"rounds", rounds}, {"bytes_are", whole_sizes ? "whole" : "block"},
                          {"configs", names}, {"sizes", nlohmann::json::array()}};
    for (std::size_t bytes = smallest; bytes <= largest; bytes *= 2) {
      // all_reduce, broadcast: `data` is the buffer. The others: it is each
      // rank's block, and `whole` holds n blocks.
      const bool in_blocks =
          op != "all_reduce" && op != "broadcast" && op != "reduce" && op != "send_recv";
      std::vector<float> data(
          in_blocks && whole_sizes
              ? std::max<std::size_t>(1, bytes / sizeof(float) / static_cast<std::size_t>(n))
              : bytes / sizeof(float),
          1.0f);
      std::vector<float> whole(in_blocks ? data.size() * static_cast<std::size_t>(n) : 0);
      std::vector<float> received(op == "all_to_all"  ? whole.size()
                                  : op == "send_recv" ? data.size()
                                                      : 0);
      for (Config& config : configs) {
        config.memory.clear();
        const auto place = [&](std::vector<float>& own) {
          if (!config.allocated) return std::span(own);
          config.memory.push_back(config.comm->allocate(own.size() * sizeof(float)));
          const std::span<float> shared(static_cast<float*>(config.memory.back().get()),
                                        own.size());
          std::copy(own.begin(), own.end(), shared.begin());
          return shared;
        };
        config.data = place(data);
        config.whole = place(whole);
        config.received = place(received);
      }
      const auto run_once = [&](Config& config) {
        if (!config.comm) return run_raw_mpi(op, config.data, config.whole, config.received);
        Communicator& comm = *config.comm;
        const Buffer block = Buffer::of(config.data);
        const Buffer blocks = Buffer::of(config.whole);
        if (op == "all_reduce") {
          comm.all_reduce(config.data, ReduceOp::sum);
        } else if (op == "broadcast") {
          comm.broadcast(block, 0);
        } else if (op == "all_gather") {
          comm.all_gather(block, blocks);
        } else if (op == "reduce_scatter") {
          comm.reduce_scatter(blocks, block, ReduceOp::sum);
        } else if (op == "scatter") {
          comm.scatter(blocks, block, 0);
        } else if (op == "gather") {
          comm.gather(block, blocks, 0);
        } else if (op == "reduce") {
          comm.reduce(block, ReduceOp::sum, 0);
        } else if (op == "send_recv") {
          const int rank = comm.rank(), next = (rank + 1) % n, previous = (rank + n - 1) % n;
          if (rank % 2 == 0) comm.send(block, next, 0);
          comm.recv(Buffer::of(config.received), previous, 0);
          if (rank % 2 != 0) comm.send(block, next, 0);
        } else {
          comm.all_to_all(blocks, Buffer::of(config.received));
        }
      };
      // Each config is timed within its own transport.
      const auto barrier = [](Config& config) {
        if (!config.comm) return raw_mpi_barrier();
        config.comm->barrier();
      };
      const auto slowest_of = [](Config& config, double mine) {
        if (!config.comm) return raw_mpi_slowest(mine);
        std::vector<double> slowest{mine};
        config.comm->all_reduce(std::span(slowest), ReduceOp::max);
        return slowest[0];
      };
      // A round lasts about a millisecond or more: enough operations to
      // outweigh the barrier and the clock.
      const int per_round = bytes <= 64 * 1024 ? 100 : bytes <= 1024 * 1024 ? 10 : 3;
      std::vector<std::size_t> order(configs.size());
      for (std::size_t c = 0; c < order.size(); ++c)
        order[c] = c;
      for (Config& config : configs)
        config.times.clear();
      for (int round = 0; round < rounds; ++round) {
        std::shuffle(order.begin(), order.end(), shuffle);
        for (std::size_t c : order) {
          run_once(configs[c]);  // warm: the buffer's pages, the peers' caches
          double mine = 0;
          if (cold > 0) {
            for (int k = 0; k < per_round; ++k) {
              std::fill(evict.begin(), evict.end(), static_cast<unsigned char>(k + round));
              barrier(configs[c]);
              const auto start = std::chrono::steady_clock::now();
              run_once(configs[c]);
              mine += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() -
                                                                start)
                          .count() /
                      per_round;
            }
          } else {
            barrier(configs[c]);
            const auto start = std::chrono::steady_clock::now();
            for (int k = 0; k < per_round; ++k)
              run_once(configs[c]);
            mine =
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count() /
                per_round;
          }
          configs[c].times.push_back(slowest_of(configs[c], mine));
        }
      }
      if (world.rank() != 0) continue;
      std::printf("%12zu", bytes);
      const double first = median(configs.front().times);
      for (const Config& config : configs) {
        const double time = median(config.times);
        std::printf("  %10.1f (%.2fx)", time, first / time);
      }
      std::printf("\n");
      std::fflush(stdout);
      run["sizes"].push_back(json_size(bytes, configs));
    }
    if (world.rank() == 0 && !json_path.empty()) write_json(json_path, run);
    if (own_mpi) {
      configs.clear();
      finalize_mpi();
    }
    return 0;
  } catch (const cohort::Error& error) {
    std::fprintf(stderr, "settings_in_one_job: %s\n", error.what());
    return 1;
  }
}
