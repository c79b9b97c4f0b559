// resnet50_ddp: ResNet-50 (torchvision's architecture, in C++) trained with
// cohort::torch::DistributedDataParallel, on synthetic data (--synthetic, like
// the tutorials' --use_syn) or on an image folder (--data DIR, one subfolder
// per class) that DistributedSampler shards across the ranks. Rank 0 prints
// each step's loss; every rank prints its images/second, rank 0 the total.
//
//   cohort run -n 2 build/bin/resnet50_ddp --synthetic --steps 3 --batch-size 2 --image-size 64
//   cohort run -n 2 build/bin/resnet50_ddp --data ~/imagenette/train --batch-size 16
//   srun -N2 --ntasks-per-node=1 build/bin/resnet50_ddp ...      (one rank per task)
//   mpirun -np 2 build/bin/resnet50_ddp ...
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <cohort/cohort.hpp>
#include <cohort/torch.hpp>

#include "image_folder.hpp"
#include "resnet.hpp"

namespace {

struct Options {
  bool synthetic = false;
  std::string data;
  int64_t batch_size = 32;
  int64_t image_size = 224;
  int steps = 10;
  double lr = 0.1;
  int64_t classes = 1000;  ///< --synthetic only; --data has one class per subfolder
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "usage: resnet50_ddp (--synthetic [--classes N] | --data DIR) [--batch-size N] "
               "[--image-size PX] [--steps N] [--lr X]\nresnet50_ddp: %s\n",
               problem.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    const auto positive = [&]() -> int64_t {
      const char* text = value();
      char* end = nullptr;
      const long long n = std::strtoll(text, &end, 10);
      if (*text == '\0' || *end != '\0' || n <= 0)
        usage(arg + " takes a whole number above 0, not '" + text + "'");
      return n;
    };
    if (arg == "--synthetic") {
      options.synthetic = true;
    } else if (arg == "--data") {
      options.data = value();
    } else if (arg == "--batch-size") {
      options.batch_size = positive();
    } else if (arg == "--image-size") {
      options.image_size = positive();
    } else if (arg == "--steps") {
      options.steps = static_cast<int>(positive());
    } else if (arg == "--lr") {
      options.lr = std::atof(value());
    } else if (arg == "--classes") {
      options.classes = positive();
    } else {
      usage("unknown option " + arg);
    }
  }
  if (options.synthetic == !options.data.empty())
    usage("give exactly one of --synthetic and --data DIR");
  if (!options.data.empty() && !ImageFolder::can_decode())
    usage(
        "this build cannot decode images for --data: install libstb-dev (scripts/install-deps) and "
        "rebuild");
  return options;
}

// Where each step's batch comes from: one fixed random batch per rank
// (synthetic), or this rank's share of the image folder, epoch after epoch.
class Batches {
 public:
  Batches(const Options& options, const cohort::World& world) : options_(options) {
    if (options.synthetic) {
      torch::manual_seed(1 + world.rank());  // different data on every rank
      images_ = torch::randn({options.batch_size, 3, options.image_size, options.image_size});
      labels_ = torch::randint(options.classes, {options.batch_size});
      return;
    }
    folder_.emplace(options.data);
    sampler_.emplace(folder_->size(), world.rank(), world.size(), /*shuffle=*/true);
    if (world.rank() == 0)
      std::printf("data: %zu images in %zu classes from %s; %zu per rank per epoch\n",
                  folder_->size(), folder_->classes().size(), options.data.c_str(),
                  sampler_->size());
  }

  int64_t classes() const {
    return folder_ ? static_cast<int64_t>(folder_->classes().size()) : options_.classes;
  }

  // The next batch. Every rank gets as many indices per epoch (the sampler
  // pads), so every rank's batches have the same sizes and no rank waits for
  // a gradient another never sends. An epoch's last, incomplete batch is
  // dropped (DataLoader's drop_last): a batch of one would stop BatchNorm.
  std::pair<torch::Tensor, torch::Tensor> next() {
    if (!folder_) return {images_, labels_};
    const auto batch = static_cast<std::size_t>(options_.batch_size);
    // A share smaller than one batch is one batch.
    const std::size_t per_epoch = std::max<std::size_t>(1, sampler_->size() / batch);
    if (batch_in_epoch_ == per_epoch || indices_.empty()) {
      sampler_->set_epoch(epoch_++);
      indices_ = sampler_->indices();
      batch_in_epoch_ = 0;
    }
    const std::size_t begin = batch_in_epoch_++ * batch;
    const std::size_t end = std::min(indices_.size(), begin + batch);
    return folder_->batch({indices_.begin() + static_cast<std::ptrdiff_t>(begin),
                           indices_.begin() + static_cast<std::ptrdiff_t>(end)},
                          options_.image_size);
  }

 private:
  const Options& options_;
  torch::Tensor images_, labels_;
  std::optional<ImageFolder> folder_;
  std::optional<cohort::torch::DistributedSampler> sampler_;
  std::vector<std::size_t> indices_;  ///< this epoch's share
  std::size_t batch_in_epoch_ = 0;
  std::uint64_t epoch_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    cohort::World world = cohort::init();
    const int rank = world.rank();
    Batches batches(options, world);
    torch::manual_seed(0);
    const auto model = resnet::resnet50(batches.classes());
    cohort::torch::DistributedDataParallel ddp(model, world.communicator());
    torch::optim::SGD optimizer(model->parameters(),
                                torch::optim::SGDOptions(options.lr).momentum(0.9));
    using Clock = std::chrono::steady_clock;
    Clock::time_point timed_start;
    int64_t timed_images = 0;
    for (int step = 0; step < options.steps; ++step) {
      if (step == 1) timed_start = Clock::now();  // step 0 warms up
      const auto [images, labels] = batches.next();
      ddp.sync_buffers();
      optimizer.zero_grad();
      const torch::Tensor loss = torch::cross_entropy_loss(model->forward(images), labels);
      loss.backward();
      optimizer.step();
      if (step >= 1) timed_images += images.size(0);
      if (rank == 0) std::printf("step %d: loss %.4f\n", step, loss.item<double>());
    }
    const int timed = options.steps - 1;
    const double seconds =
        timed > 0 ? std::chrono::duration<double>(Clock::now() - timed_start).count() : 0;
    const double mine = seconds > 0 ? double(timed_images) / seconds : 0;
    torch::Tensor total = torch::full({1}, mine, torch::kFloat64);
    cohort::torch::all_reduce(world.communicator(), total);
    std::printf("rank %d: %.1f images/s\n", rank, mine);
    if (rank == 0) {
      std::printf(
          "total: %.1f images/s on %d ranks (%d timed steps of up to %lld images per rank)\n",
          total.item<double>(), world.size(), timed, static_cast<long long>(options.batch_size));
    }
    return 0;
  } catch (const c10::Error& error) {  // LibTorch's: its message without the C++ backtrace
    std::fprintf(stderr, "resnet50_ddp: %s\n", error.what_without_backtrace());
    return 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "resnet50_ddp: %s\n", error.what());
    return 1;
  }
}
