// cohort bench allreduce: all-reduce bus bandwidth, in the manner of
// nccl-tests' all_reduce_perf: a row per size as it completes; --op times
// another collective (or send/recv in a ring) instead, with nccl-tests' sizes
// and bus-bandwidth factors. It starts its own workers through `cohort run`;
// with --worker it is one rank of a job started by anything else (srun,
// mpirun).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cohort/cohort.hpp>

#include "cli/commands.hpp"
#include "core/fd.hpp"
#include "core/strings.hpp"

namespace cohort::cli {
namespace {

struct BenchArguments {
  int workers = 2;
  std::string sizes = "4K:256M";
  int iterations = 20;
  int reps = 5;
  int warmup = 3;
  std::string json;
  std::string backend;
  std::string op = "all_reduce";
  bool allocate = false;
  std::string cpu_bind = "none";
};

// One timed collective, as nccl-tests counts it: `size` is the all_reduce
// and broadcast buffer, all_gather's output, reduce_scatter's input (n
// slices); busbw = algbw × the factor (what each rank must move, relative to
// size, over its link).
struct Operation {
  const char* name;
  double (*bus_factor)(int n);
  /// Elements of the input and output buffers for `bytes` on n ranks (0:
  /// in place, on the input).
  std::pair<std::size_t, std::size_t> (*counts)(std::size_t bytes, int n);
  /// One timed call.
  void (*call)(Communicator& comm, std::span<float> input, std::span<float> output);
};

// all_gather's input and reduce_scatter's output: one of n slices.
std::size_t slice_of(std::size_t bytes, int n) {
  return std::max<std::size_t>(1, bytes / sizeof(float) / static_cast<std::size_t>(n));
}

const Operation kOperations[] = {
    {"all_reduce", [](int n) { return 2.0 * (n - 1) / n; },
     [](std::size_t bytes, int) {
       return std::pair{bytes / sizeof(float), std::size_t{0}};
     },
     [](Communicator& comm, std::span<float> input, std::span<float>) {
       comm.all_reduce(input, ReduceOp::sum);
     }},
    {"broadcast", [](int) { return 1.0; },
     [](std::size_t bytes, int) {
       return std::pair{bytes / sizeof(float), std::size_t{0}};
     },
     [](Communicator& comm, std::span<float> input, std::span<float>) {
       comm.broadcast(input, 0);
     }},
    {"reduce", [](int) { return 1.0; },
     [](std::size_t bytes, int) {
       return std::pair{bytes / sizeof(float), std::size_t{0}};
     },
     [](Communicator& comm, std::span<float> input, std::span<float>) {
       comm.reduce(Buffer::of(input), ReduceOp::sum, 0);
     }},
    {"all_gather", [](int n) { return static_cast<double>(n - 1) / n; },
     [](std::size_t bytes, int n) {
       return std::pair{slice_of(bytes, n), slice_of(bytes, n) * static_cast<std::size_t>(n)};
     },
     [](Communicator& comm, std::span<float> input, std::span<float> output) {
       comm.all_gather(Buffer::of(input), Buffer::of(output));
     }},
    {"reduce_scatter", [](int n) { return static_cast<double>(n - 1) / n; },
     [](std::size_t bytes, int n) {
       return std::pair{slice_of(bytes, n) * static_cast<std::size_t>(n), slice_of(bytes, n)};
     },
     [](Communicator& comm, std::span<float> input, std::span<float> output) {
       comm.reduce_scatter(Buffer::of(input), Buffer::of(output), ReduceOp::sum);
     }},
    {"gather", [](int n) { return static_cast<double>(n - 1) / n; },
     [](std::size_t bytes, int n) {
       return std::pair{slice_of(bytes, n), slice_of(bytes, n) * static_cast<std::size_t>(n)};
     },
     [](Communicator& comm, std::span<float> input, std::span<float> output) {
       comm.gather(Buffer::of(input), Buffer::of(output), 0);
     }},
    {"scatter", [](int n) { return static_cast<double>(n - 1) / n; },
     [](std::size_t bytes, int n) {
       return std::pair{slice_of(bytes, n) * static_cast<std::size_t>(n), slice_of(bytes, n)};
     },
     [](Communicator& comm, std::span<float> input, std::span<float> output) {
       comm.scatter(Buffer::of(input), Buffer::of(output), 0);
     }},
    {"all_to_all", [](int n) { return static_cast<double>(n - 1) / n; },
     [](std::size_t bytes, int n) {
       const std::size_t count = slice_of(bytes, n) * static_cast<std::size_t>(n);
       return std::pair{count, count};
     },
     [](Communicator& comm, std::span<float> input, std::span<float> output) {
       comm.all_to_all(Buffer::of(input), Buffer::of(output));
     }},
    // A ring: each rank sends its buffer to the next and receives the
    // previous one's; even ranks send first, so that no ring waits in a circle.
    {"send_recv", [](int) { return 1.0; },
     [](std::size_t bytes, int) {
       return std::pair{bytes / sizeof(float), bytes / sizeof(float)};
     },
     [](Communicator& comm, std::span<float> input, std::span<float> output) {
       const int n = comm.size(), rank = comm.rank();
       const int next = (rank + 1) % n, previous = (rank + n - 1) % n;
       if (rank % 2 == 0) comm.send(input, next);
       comm.recv(output, previous);
       if (rank % 2 != 0) comm.send(input, next);
     }},
};

// A benchmark's buffer: its own memory, or the communicator's (--allocate).
class BenchBuffer {
 public:
  BenchBuffer(Communicator& comm, bool allocate, std::size_t count, float value) {
    if (allocate) {
      shared_ = comm.allocate(count * sizeof(float));
      span_ = std::span(static_cast<float*>(shared_.get()), count);
    } else {
      own_.resize(count);
      span_ = std::span(own_);
    }
    std::fill(span_.begin(), span_.end(), value);
  }
  std::span<float> span() const { return span_; }

 private:
  std::vector<float> own_;
  std::shared_ptr<void> shared_;
  std::span<float> span_;
};

const Operation& operation_named(const std::string& name) {
  for (const Operation& operation : kOperations) {
    if (name == operation.name) return operation;
  }
  throw CLI::ValidationError("--op", detail::cat("'", name,
                                                 "' is not one of all_reduce, broadcast, "
                                                 "reduce, all_gather, reduce_scatter, gather, "
                                                 "scatter, all_to_all, send_recv"));
}

std::size_t parse_size(const std::string& text) {
  const std::optional<std::size_t> bytes = detail::parse_byte_size(text);
  if (!bytes || *bytes < 4 || *bytes > (std::size_t{1} << 40)) {
    throw CLI::ValidationError("--sizes", detail::cat("'", text,
                                                      "' is not a size of at least 4 bytes "
                                                      "(e.g. 4K, 1M, 256M)"));
  }
  return *bytes;
}

// "4K:256M" -> 4K, 8K, ..., 256M (doubling).
std::vector<std::size_t> parse_sizes(const std::string& text) {
  const std::size_t colon = text.find(':');
  const std::size_t low = parse_size(text.substr(0, colon));
  const std::size_t high = colon == std::string::npos ? low : parse_size(text.substr(colon + 1));
  if (high < low) throw CLI::ValidationError("--sizes", "the largest size is below the smallest");
  std::vector<std::size_t> sizes;
  for (std::size_t size = low; size <= high; size *= 2)
    sizes.push_back(size);
  return sizes;
}

// The mpi backend serves only ranks that MPI's own launcher started: the
// workers run under mpirun instead of `cohort run` (this process becomes it).
[[noreturn]] void exec_mpirun(std::vector<std::string> worker, int ranks) {
  const std::string self = detail::executable_path();
  worker.front() = self.empty() ? "/proc/self/exe" : self;
  std::vector<std::string> argv{"mpirun", "--oversubscribe", "-np", std::to_string(ranks)};
  if (::geteuid() == 0) argv.insert(argv.begin() + 1, "--allow-run-as-root");
  argv.insert(argv.end(), worker.begin(), worker.end());
  std::fprintf(stderr, "cohort bench: the mpi backend's ranks are started by mpirun: %s\n",
               detail::join(argv, " ").c_str());
  std::vector<char*> pointers;
  pointers.reserve(argv.size() + 1);
  for (std::string& item : argv)
    pointers.push_back(item.data());
  pointers.push_back(nullptr);
  ::execvp(pointers[0], pointers.data());
  throw Error(detail::cat("cohort bench: cannot start mpirun: ", std::strerror(errno),
                          " (install openmpi-bin: scripts/install-deps bench)"));
}

// One rank of the benchmark: rank 0 prints the table.
int run_worker(const BenchArguments& arguments) {
  InitOptions options;
  options.backend = arguments.backend;
  World world = init(options);
  Communicator& comm = world.communicator();
  const int n = world.size();
  const bool leader = world.rank() == 0;
  const bool progress = ::isatty(STDERR_FILENO) != 0;  // a line that rewrites itself
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  const Operation& operation = operation_named(arguments.op);
  if (leader) {
    std::printf("# cohort bench allreduce --op %s: %d ranks, backend %s, float32%s%s\n",
                operation.name, n, std::string(world.backend()).c_str(),
                arguments.op == "all_reduce" ? " sum, in place" : "",
                arguments.allocate ? ", buffers from Communicator::allocate" : "");
    std::printf("# median of %d reps; a rep = the slowest rank's mean over iters\n",
                arguments.reps);
    std::printf("# %12s %12s %8s %12s %12s %12s\n", "size (B)", "count", "iters", "time (us)",
                "algbw (GB/s)", "busbw (GB/s)");
  }
  for (std::size_t bytes : parse_sizes(arguments.sizes)) {
    const auto [input_count, output_count] = operation.counts(bytes, n);
    const BenchBuffer input(comm, arguments.allocate, input_count, 1.0f);
    const BenchBuffer output(comm, arguments.allocate, output_count, 0.0f);
    const std::size_t count = std::max(input_count, output_count);
    const std::size_t moved = count * sizeof(float);
    // Fewer iterations for large messages: about 1 GiB moved per size at most.
    const int iterations = static_cast<int>(std::clamp<std::size_t>(
        (std::size_t{1} << 30) / moved, 3, static_cast<std::size_t>(arguments.iterations)));
    for (int i = 0; i < arguments.warmup; ++i)
      operation.call(comm, input.span(), output.span());
    // Each rep times `iterations` back-to-back operations; a rep's time is the
    // slowest rank's mean, and the row shows the median rep.
    std::vector<double> reps;
    for (int rep = 0; rep < arguments.reps; ++rep) {
      if (leader && progress) {
        std::fprintf(stderr, "\r# measuring %zu B, rep %d/%d ...", bytes, rep + 1, arguments.reps);
      }
      comm.barrier();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iterations; ++i)
        operation.call(comm, input.span(), output.span());
      double seconds[] = {
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
          iterations};
      comm.all_reduce(std::span(seconds), ReduceOp::max);
      reps.push_back(seconds[0]);
    }
    if (leader && progress) std::fprintf(stderr, "\r\033[K");
    std::sort(reps.begin(), reps.end());
    const double seconds[] = {reps[reps.size() / 2]};
    const double algbw = static_cast<double>(moved) / seconds[0] / 1e9;
    const double busbw = algbw * operation.bus_factor(n);
    if (leader) {
      std::printf("  %12zu %12zu %8d %12.1f %12.3f %12.3f\n", moved, count, iterations,
                  seconds[0] * 1e6, algbw, busbw);
      std::fflush(stdout);
      rows.push_back({{"bytes", moved},
                      {"count", count},
                      {"iterations", iterations},
                      {"time_us", seconds[0] * 1e6},
                      {"algbw_gbps", algbw},
                      {"busbw_gbps", busbw}});
    }
  }
  if (leader && !arguments.json.empty()) {
    std::ofstream(arguments.json) << nlohmann::ordered_json{{"ranks", n},
                                                            {"op", operation.name},
                                                            {"backend",
                                                             std::string(world.backend())},
                                                            {"results", rows}}
                                         .dump(1)
                                  << "\n";
  }
  return kExitOk;
}

}  // namespace

void add_bench_command(CLI::App& app, Runner& run) {
  CLI::App* bench = app.add_subcommand("bench", kBenchSummary);
  bench->require_subcommand(1);
  auto arguments = std::make_shared<BenchArguments>();
  auto worker = std::make_shared<bool>(false);
  CLI::App* allreduce = bench->add_subcommand(
      "allreduce",
      "All-reduce time and bandwidth per message size (float32 sum), like nccl-tests: "
      "algbw = size / time, busbw = algbw × 2(n−1)/n");
  allreduce->add_option("-n,--nproc", arguments->workers, "local workers to start (default 2)")
      ->check(CLI::Range(1, 4096));
  allreduce->add_option("--sizes", arguments->sizes,
                        "MIN:MAX in bytes, doubling (default 4K:256M)");
  allreduce->add_option("--iters", arguments->iterations, "timed iterations per size (default 20)")
      ->check(CLI::Range(1, 1000000));
  allreduce
      ->add_option("--reps", arguments->reps,
                   "timed reps per size; the row shows the median (default 5)")
      ->check(CLI::Range(1, 1000));
  allreduce->add_option("--warmup", arguments->warmup, "untimed iterations first (default 3)")
      ->check(CLI::Range(0, 1000000));
  allreduce->add_option("--json", arguments->json, "also write the results to FILE");
  allreduce->add_option("--backend", arguments->backend, "collectives backend (default: best)");
  allreduce->add_option("--op", arguments->op,
                        "the collective timed: all_reduce (default), broadcast, reduce (to "
                        "rank 0), all_gather, reduce_scatter, gather, scatter, all_to_all, "
                        "send_recv (a ring) "
                        "(sizes and busbw as nccl-tests count them)");
  allreduce->add_flag("--allocate", arguments->allocate,
                      "buffers from Communicator::allocate (shm: every rank maps them, and "
                      "all_reduce works in place in the peers' buffers)");
  allreduce
      ->add_option("--cpu-bind", arguments->cpu_bind,
                   "bind each worker's CPUs as cohort run --cpu-bind does (none, cores, ...): "
                   "mpirun binds each rank to a core by default, so --backend mpi always is")
      ->check(CLI::IsMember({"none", "numa", "gpu", "cores"}));
  allreduce->add_flag("--worker", *worker,
                      "be one rank (what bench starts itself; also for srun / mpirun)");
  allreduce->callback([&run, arguments, worker] {
    parse_sizes(arguments->sizes);  // a bad --sizes or --op is a usage error before anything starts
    operation_named(arguments->op);
    run = [arguments, worker] {
      if (*worker) return run_worker(*arguments);
      RunOptions options;
      options.command = {"/proc/self/exe", "bench",
                         "allreduce",      "--worker",
                         "--sizes",        arguments->sizes,
                         "--iters",        std::to_string(arguments->iterations),
                         "--reps",         std::to_string(arguments->reps),
                         "--warmup",       std::to_string(arguments->warmup),
                         "--op",           arguments->op};
      if (!arguments->json.empty()) {
        options.command.insert(options.command.end(), {"--json", arguments->json});
      }
      if (!arguments->backend.empty()) {
        options.command.insert(options.command.end(), {"--backend", arguments->backend});
      }
      if (arguments->allocate) options.command.push_back("--allocate");
      if (arguments->backend == "mpi") exec_mpirun(options.command, arguments->workers);
      options.nproc_per_node = arguments->workers;
      options.cpu_bind = arguments->cpu_bind;
      options.prefix = "";
      options.console_ranks = {0};
      return cohort::run(options);
    };
  });
}

}  // namespace cohort::cli
