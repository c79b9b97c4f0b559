// cohort bench allreduce: all-reduce bus bandwidth, in the manner of
// nccl-tests' all_reduce_perf: a row per size as it completes. It starts its
// own workers through `cohort run`; with --worker it is one rank of a job
// started by anything else (srun, mpirun).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
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
};

std::size_t parse_size(const std::string& text) {
  std::string digits = text;
  std::size_t multiplier = 1;
  const char suffix = digits.empty() ? '\0' : digits.back();
  if (suffix == 'K' || suffix == 'k') multiplier = std::size_t{1} << 10;
  if (suffix == 'M' || suffix == 'm') multiplier = std::size_t{1} << 20;
  if (suffix == 'G' || suffix == 'g') multiplier = std::size_t{1} << 30;
  if (multiplier != 1) digits.pop_back();
  const auto number = detail::parse_int(digits);
  if (!number || *number < 1 || static_cast<std::size_t>(*number) * multiplier < 4 ||
      *number > (std::int64_t{1} << 40)) {
    throw CLI::ValidationError("--sizes", detail::cat("'", text,
                                                      "' is not a size of at least 4 bytes "
                                                      "(e.g. 4K, 1M, 256M)"));
  }
  return static_cast<std::size_t>(*number) * multiplier;
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
  if (leader) {
    std::printf("# cohort bench allreduce: %d ranks, backend %s, float32 sum, in place\n", n,
                std::string(world.backend()).c_str());
    std::printf("# median of %d reps; a rep = the slowest rank's mean over iters\n",
                arguments.reps);
    std::printf("# %12s %12s %8s %12s %12s %12s\n", "size (B)", "count", "iters", "time (us)",
                "algbw (GB/s)", "busbw (GB/s)");
  }
  for (std::size_t bytes : parse_sizes(arguments.sizes)) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    // Fewer iterations for large messages: about 1 GiB moved per size at most.
    const int iterations = static_cast<int>(std::clamp<std::size_t>(
        (std::size_t{1} << 30) / bytes, 3, static_cast<std::size_t>(arguments.iterations)));
    for (int i = 0; i < arguments.warmup; ++i)
      comm.all_reduce(std::span(data), ReduceOp::sum);
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
        comm.all_reduce(std::span(data), ReduceOp::sum);
      double seconds[] = {
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
          iterations};
      comm.all_reduce(std::span(seconds), ReduceOp::max);
      reps.push_back(seconds[0]);
    }
    if (leader && progress) std::fprintf(stderr, "\r\033[K");
    std::sort(reps.begin(), reps.end());
    const double seconds[] = {reps[reps.size() / 2]};
    const double algbw = static_cast<double>(bytes) / seconds[0] / 1e9;
    const double busbw = algbw * 2.0 * (n - 1) / n;
    if (leader) {
      std::printf("  %12zu %12zu %8d %12.1f %12.3f %12.3f\n", bytes, data.size(), iterations,
                  seconds[0] * 1e6, algbw, busbw);
      std::fflush(stdout);
      rows.push_back({{"bytes", bytes},
                      {"count", data.size()},
                      {"iterations", iterations},
                      {"time_us", seconds[0] * 1e6},
                      {"algbw_gbps", algbw},
                      {"busbw_gbps", busbw}});
    }
  }
  if (leader && !arguments.json.empty()) {
    std::ofstream(arguments.json) << nlohmann::ordered_json{{"ranks", n},
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
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks of this machine and build");
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
  allreduce->add_flag("--worker", *worker,
                      "be one rank (what bench starts itself; also for srun / mpirun)");
  allreduce->callback([&run, arguments, worker] {
    parse_sizes(arguments->sizes);  // a bad --sizes is a usage error before anything starts
    run = [arguments, worker] {
      if (*worker) return run_worker(*arguments);
      RunOptions options;
      options.command = {"/proc/self/exe", "bench",
                         "allreduce",      "--worker",
                         "--sizes",        arguments->sizes,
                         "--iters",        std::to_string(arguments->iterations),
                         "--reps",         std::to_string(arguments->reps),
                         "--warmup",       std::to_string(arguments->warmup)};
      if (!arguments->json.empty()) {
        options.command.insert(options.command.end(), {"--json", arguments->json});
      }
      if (!arguments->backend.empty()) {
        options.command.insert(options.command.end(), {"--backend", arguments->backend});
      }
      if (arguments->backend == "mpi") exec_mpirun(options.command, arguments->workers);
      options.nproc_per_node = arguments->workers;
      options.prefix = "";
      options.console_ranks = {0};
      return cohort::run(options);
    };
  });
}

}  // namespace cohort::cli
