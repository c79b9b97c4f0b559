// resnet50_ddp: ResNet-50 (torchvision's architecture, in C++) trained with
// cohort::torch::DistributedDataParallel on synthetic data, like the
// tutorials' --use_syn. Rank 0 prints each step's loss; every rank prints
// its images/second, rank 0 the total.
//
//   cohort run -n 2 build/bin/resnet50_ddp --synthetic --steps 3 --batch-size 2 --image-size 64
//   srun -N2 --ntasks-per-node=1 build/bin/resnet50_ddp ...      (one rank per task)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <cohort/cohort.hpp>
#include <cohort/torch.hpp>

namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1) {
  return nn::Conv2d(
      nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// torchvision's Bottleneck: 1x1, 3x3 (stride here, as in torchvision v1.5), 1x1 x4.
struct BottleneckImpl : nn::Module {
  static constexpr int64_t kExpansion = 4;
  BottleneckImpl(int64_t in, int64_t width, int64_t stride) {
    conv1 = register_module("conv1", conv(in, width, 1));
    bn1 = register_module("bn1", nn::BatchNorm2d(width));
    conv2 = register_module("conv2", conv(width, width, 3, stride));
    bn2 = register_module("bn2", nn::BatchNorm2d(width));
    conv3 = register_module("conv3", conv(width, width * kExpansion, 1));
    bn3 = register_module("bn3", nn::BatchNorm2d(width * kExpansion));
    if (stride != 1 || in != width * kExpansion) {
      downsample =
          register_module("downsample", nn::Sequential(conv(in, width * kExpansion, 1, stride),
                                                       nn::BatchNorm2d(width * kExpansion)));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor out = torch::relu(bn1(conv1(x)));
    out = torch::relu(bn2(conv2(out)));
    out = bn3(conv3(out));
    return torch::relu(out + (downsample ? downsample->forward(x) : x));
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  nn::Sequential downsample{nullptr};
};
TORCH_MODULE(Bottleneck);

struct ResNet50Impl : nn::Module {
  explicit ResNet50Impl(int64_t classes) {
    conv1 = register_module("conv1", conv(3, 64, 7, 2));
    bn1 = register_module("bn1", nn::BatchNorm2d(64));
    int64_t in = 64;
    const int64_t blocks[] = {3, 4, 6, 3};
    for (int stage = 0; stage < 4; ++stage) {
      const int64_t width = 64 << stage;
      nn::Sequential layer;
      for (int64_t b = 0; b < blocks[stage]; ++b) {
        layer->push_back(Bottleneck(in, width, b == 0 && stage > 0 ? 2 : 1));
        in = width * BottleneckImpl::kExpansion;
      }
      layers.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    fc = register_module("fc", nn::Linear(in, classes));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(bn1(conv1(x))), 3, 2, 1);
    for (auto& layer : layers)
      x = layer->forward(x);
    return fc(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
  }
  nn::Conv2d conv1{nullptr};
  nn::BatchNorm2d bn1{nullptr};
  std::vector<nn::Sequential> layers;
  nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet50);

struct Options {
  bool synthetic = false;
  int64_t batch_size = 32;
  int64_t image_size = 224;
  int steps = 10;
  double lr = 0.1;
  int64_t classes = 1000;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "resnet50_ddp: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--synthetic") {
      options.synthetic = true;
    } else if (arg == "--batch-size") {
      options.batch_size = std::atoll(value());
    } else if (arg == "--image-size") {
      options.image_size = std::atoll(value());
    } else if (arg == "--steps") {
      options.steps = std::atoi(value());
    } else if (arg == "--lr") {
      options.lr = std::atof(value());
    } else if (arg == "--classes") {
      options.classes = std::atoll(value());
    } else {
      std::fprintf(stderr,
                   "usage: resnet50_ddp --synthetic [--batch-size N] [--image-size PX] "
                   "[--steps N] [--lr X] [--classes N]\n(unknown: %s)\n",
                   arg.c_str());
      std::exit(2);
    }
  }
  if (!options.synthetic) {
    std::fprintf(stderr,
                 "resnet50_ddp: only --synthetic data for now (an image folder reader "
                 "is still to come)\n");
    std::exit(2);
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    cohort::World world = cohort::init();
    const int rank = world.rank();
    torch::manual_seed(0);
    ResNet50 model(options.classes);
    cohort::torch::DistributedDataParallel ddp(model.ptr(), world.communicator());
    torch::optim::SGD optimizer(model->parameters(),
                                torch::optim::SGDOptions(options.lr).momentum(0.9));
    // Synthetic data, different on every rank, as the tutorials' --use_syn.
    torch::manual_seed(1 + rank);
    const torch::Tensor images =
        torch::randn({options.batch_size, 3, options.image_size, options.image_size});
    const torch::Tensor labels = torch::randint(options.classes, {options.batch_size});
    using Clock = std::chrono::steady_clock;
    Clock::time_point timed_start;
    for (int step = 0; step < options.steps; ++step) {
      if (step == 1) timed_start = Clock::now();  // step 0 warms up
      ddp.sync_buffers();
      optimizer.zero_grad();
      const torch::Tensor loss = torch::cross_entropy_loss(model->forward(images), labels);
      loss.backward();
      optimizer.step();
      if (rank == 0) std::printf("step %d: loss %.4f\n", step, loss.item<double>());
    }
    const int timed = options.steps - 1;
    const double seconds =
        timed > 0 ? std::chrono::duration<double>(Clock::now() - timed_start).count() : 0;
    const double mine = seconds > 0 ? double(options.batch_size) * timed / seconds : 0;
    torch::Tensor total = torch::full({1}, mine, torch::kFloat64);
    cohort::torch::all_reduce(world.communicator(), total);
    std::printf("rank %d: %.1f images/s\n", rank, mine);
    if (rank == 0) {
      std::printf("total: %.1f images/s on %d ranks (%d timed steps of %lld images per rank)\n",
                  total.item<double>(), world.size(), timed,
                  static_cast<long long>(options.batch_size));
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
