// One side of bench/ddp: ResNet-18 training steps on cohort::torch, timed.
//
//   cohort run -n 2 build/bin/ddp_step --mode ddp|nosync [--batch 16] [--image 64]
//       [--steps 20] [--warmup 5] [--threads 1] [--bucket-mb 25] [--broadcast-buffers 1]
//       [--overlap auto|always|never]
//
// A step is zero_grad + forward + backward (+ the gradient all-reduce in
// --mode ddp; --mode nosync runs the same DDP model inside no_sync()) +
// SGD step, on a synthetic batch that differs per rank. Rank 0 prints one
// JSON line: the slowest rank's mean step time over the timed steps, and
// the median of the per-step slowest-rank times.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/torch.hpp>

#include "resnet.hpp"

namespace {

struct Options {
  std::string mode = "ddp";
  int64_t batch = 16;
  int64_t image = 64;
  int steps = 20;
  int warmup = 5;
  int threads = 1;
  double bucket_mb = 25;
  bool broadcast_buffers = true;
  std::string overlap = "auto";  // DdpOptions::overlap
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    const char* value = argv[i + 1];
    if (arg == "--mode")
      options.mode = value;
    else if (arg == "--batch")
      options.batch = std::atoll(value);
    else if (arg == "--image")
      options.image = std::atoll(value);
    else if (arg == "--steps")
      options.steps = std::atoi(value);
    else if (arg == "--warmup")
      options.warmup = std::atoi(value);
    else if (arg == "--threads")
      options.threads = std::atoi(value);
    else if (arg == "--bucket-mb")
      options.bucket_mb = std::atof(value);
    else if (arg == "--broadcast-buffers")
      options.broadcast_buffers = std::atoi(value) != 0;
    else if (arg == "--overlap")
      options.overlap = value;
    else {
      std::fprintf(stderr, "ddp_step: unknown option %s\n", arg.c_str());
      std::exit(2);
    }
  }
  const bool overlap_known =
      options.overlap == "auto" || options.overlap == "always" || options.overlap == "never";
  if ((argc - 1) % 2 != 0 || (options.mode != "ddp" && options.mode != "nosync") ||
      options.steps < 1 || !overlap_known) {
    std::fprintf(stderr,
                 "usage: ddp_step --mode ddp|nosync [--batch N] [--image PX] [--steps N] "
                 "[--warmup N] [--threads N] [--bucket-mb MB] [--broadcast-buffers 0|1] "
                 "[--overlap auto|always|never]\n");
    std::exit(2);
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    torch::set_num_threads(options.threads);
    cohort::World world = cohort::init();
    auto& comm = world.communicator();
    torch::manual_seed(0);
    const auto model = resnet::resnet18(10);
    cohort::torch::DdpOptions ddp_options;
    ddp_options.bucket_bytes = static_cast<std::size_t>(options.bucket_mb * (1 << 20));
    ddp_options.broadcast_buffers = options.broadcast_buffers;
    using Overlap = cohort::torch::DdpOptions::Overlap;
    ddp_options.overlap = options.overlap == "always"  ? Overlap::always
                          : options.overlap == "never" ? Overlap::never
                                                       : Overlap::automatic;
    cohort::torch::DistributedDataParallel ddp(model, comm, ddp_options);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    torch::manual_seed(1 + world.rank());
    const torch::Tensor images = torch::randn({options.batch, 3, options.image, options.image});
    const torch::Tensor labels = torch::randint(10, {options.batch});

    std::vector<double> step_ms;
    for (int step = 0; step < options.warmup + options.steps; ++step) {
      if (step == options.warmup) comm.barrier();
      const auto start = std::chrono::steady_clock::now();
      ddp.sync_buffers();
      optimizer.zero_grad();
      const torch::Tensor loss = torch::cross_entropy_loss(model->forward(images), labels);
      if (options.mode == "nosync") {
        auto guard = ddp.no_sync();
        loss.backward();
      } else {
        loss.backward();
      }
      optimizer.step();
      const std::chrono::duration<double, std::milli> took =
          std::chrono::steady_clock::now() - start;
      if (step >= options.warmup) step_ms.push_back(took.count());
    }
    // Each step's time on the slowest rank.
    torch::Tensor slowest = torch::tensor(step_ms, torch::kFloat64);
    cohort::torch::all_reduce(comm, slowest, cohort::ReduceOp::max);
    std::vector<double> per_step(slowest.data_ptr<double>(),
                                 slowest.data_ptr<double>() + slowest.numel());
    double sum = 0;
    for (double ms : per_step)
      sum += ms;
    std::sort(per_step.begin(), per_step.end());
    if (world.rank() == 0) {
      std::printf(
          "{\"impl\": \"cohort\", \"mode\": \"%s\", \"ranks\": %d, \"mean_ms\": %.3f, "
          "\"median_ms\": %.3f, \"steps\": %zu}\n",
          options.mode.c_str(), world.size(), sum / double(per_step.size()),
          per_step[per_step.size() / 2], per_step.size());
    }
    return 0;
  } catch (const c10::Error& error) {
    std::fprintf(stderr, "ddp_step: %s\n", error.what_without_backtrace());
    return 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddp_step: %s\n", error.what());
    return 1;
  }
}
