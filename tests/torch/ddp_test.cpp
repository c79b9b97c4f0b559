// cohort::torch on real processes: each test spawns 2 ranks (cohort::spawn)
// that train with DistributedDataParallel and check themselves against a
// single-process reference computed locally from the same seeds. A rank's
// exit code is its verdict; the test passes when both ranks pass.
#include <cstdio>
#include <fstream>
#include <tuple>

#include <gtest/gtest.h>

#include <cohort/cohort.hpp>
#include <cohort/torch.hpp>

#include "support/files.hpp"
#include "support/skip.hpp"
#include "support/subprocess.hpp"
#include "support/text.hpp"

#if COHORT_TEST_WITH_STB
#include <stb_image_write.h>
#endif

namespace {

namespace ct = cohort::torch;
using cohort::Communicator;
using cohort::World;

constexpr int kRanks = 2;
constexpr int kBatch = 8;  // global batch, split over the ranks
// Documented tolerance: float32 sums in another order (bucketed all-reduce
// against one process's backward); measured differences are ~1e-8.
constexpr double kTolerance = 1e-5;

// A small MLP; `with_unused` adds a layer forward() never touches.
struct NetImpl : ::torch::nn::Module {
  explicit NetImpl(bool with_unused = false) {
    first = register_module("first", ::torch::nn::Linear(8, 16));
    second = register_module("second", ::torch::nn::Linear(16, 4));
    if (with_unused) unused = register_module("unused", ::torch::nn::Linear(4, 4));
  }
  at::Tensor forward(const at::Tensor& x) { return second(::torch::tanh(first(x))); }
  ::torch::nn::Linear first{nullptr}, second{nullptr}, unused{nullptr};
};
TORCH_MODULE(Net);

Net make_net(bool with_unused = false) {
  ::torch::manual_seed(0);
  return Net(with_unused);
}

// Step `step`'s global batch, the same everywhere.
std::pair<at::Tensor, at::Tensor> batch(int step) {
  ::torch::manual_seed(100 + step);
  return {::torch::randn({kBatch, 8}), ::torch::randn({kBatch, 4})};
}

at::Tensor slice(const at::Tensor& tensor, int rank, int world) {
  const int share = kBatch / world;
  return tensor.narrow(0, rank * share, share);
}

double largest_difference(const Net& a, const Net& b) {
  double largest = 0;
  auto left = a->parameters();
  auto right = b->parameters();
  for (std::size_t i = 0; i < left.size(); ++i)
    largest = std::max(largest, (left[i] - right[i]).abs().max().item<double>());
  return largest;
}

// Runs `body` on kRanks spawned ranks with a World each; true when all pass.
bool on_ranks(const std::function<bool(World&)>& body) {
  cohort::RunOptions options;
  options.grace = std::chrono::milliseconds(1000);
  return cohort::spawn(
             kRanks,
             [&body] {
               World world = cohort::init();
               ::torch::set_num_threads(1);
               return body(world) ? 0 : 1;
             },
             options) == 0;
}

// Both ways of holding gradients (as views of the buckets, and apart), with
// all-reduces during backward and after it (DdpOptions::overlap).
class DdpGradients : public ::testing::TestWithParam<std::tuple<bool, bool>> {
 protected:
  static ct::DdpOptions options() {
    ct::DdpOptions chosen;
    chosen.gradient_as_bucket_view = std::get<0>(GetParam());
    chosen.overlap =
        std::get<1>(GetParam()) ? ct::DdpOptions::Overlap::always : ct::DdpOptions::Overlap::never;
    return chosen;
  }
};
INSTANTIATE_TEST_SUITE_P(AsBucketViewAndOverlap, DdpGradients,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST_P(DdpGradients, TwoRanksEndWhereOneRankOnTheCombinedBatchEnds) {
  const ct::DdpOptions chosen = options();
  EXPECT_TRUE(on_ranks([chosen](World& world) {
    const int rank = world.rank();
    Net model = make_net();
    ct::DdpOptions small = chosen;  // several buckets for a small model
    small.first_bucket_bytes = 64;
    small.bucket_bytes = 256;
    ct::DistributedDataParallel ddp(model.ptr(), world.communicator(), small);
    if (ddp.overlaps_backward() != (chosen.overlap == ct::DdpOptions::Overlap::always))
      return false;
    ::torch::optim::SGD optimizer(model->parameters(), 0.1);
    Net reference = make_net();
    ::torch::optim::SGD reference_optimizer(reference->parameters(), 0.1);
    bool same_everywhere = true;
    for (int step = 0; step < 4; ++step) {
      auto [inputs, targets] = batch(step);
      optimizer.zero_grad();
      ::torch::mse_loss(model->forward(slice(inputs, rank, kRanks)), slice(targets, rank, kRanks))
          .backward();
      optimizer.step();
      reference_optimizer.zero_grad();
      ::torch::mse_loss(reference->forward(inputs), targets).backward();
      reference_optimizer.step();
      // Every rank holds the same parameters after each step.
      for (at::Tensor& parameter : model->parameters()) {
        const at::Tensor all = ct::all_gather(world.communicator(), parameter.detach());
        same_everywhere = same_everywhere && all[0].equal(all[1]);
      }
    }
    const double difference = largest_difference(model, reference);
    std::printf("rank %d: %zu buckets, largest difference %.3g, identical across ranks: %d\n", rank,
                ddp.buckets().size(), difference, same_everywhere ? 1 : 0);
    return ddp.buckets().size() > 1 && difference < kTolerance && same_everywhere;
  }));
}

// Two micro-batches under no_sync, then a synchronized one: the sum of all
// three local gradients is averaged once.
// Twice: the second time the gradients already exist (as bucket views, by
// default) and zero_grad() clears them in place.
TEST_P(DdpGradients, GradientAccumulationUnderNoSync) {
  const ct::DdpOptions chosen = options();
  EXPECT_TRUE(on_ranks([chosen](World& world) {
    const int rank = world.rank();
    Net model = make_net();
    ct::DistributedDataParallel ddp(model.ptr(), world.communicator(), chosen);
    ::torch::optim::SGD optimizer(model->parameters(), 0.1);
    Net reference = make_net();
    ::torch::optim::SGD reference_optimizer(reference->parameters(), 0.1);
    for (int micro = 0; micro < 6; ++micro) {
      if (micro % 3 == 0) {
        optimizer.zero_grad();
        reference_optimizer.zero_grad();
      }
      auto [inputs, targets] = batch(micro);
      const auto loss = [&](Net& net, int r) {
        return ::torch::mse_loss(net->forward(slice(inputs, r, kRanks)), slice(targets, r, kRanks));
      };
      if (micro % 3 < 2) {
        auto guard = ddp.no_sync();
        loss(model, rank).backward();
      } else {
        loss(model, rank).backward();
      }
      for (int r = 0; r < kRanks; ++r)
        (loss(reference, r) / kRanks).backward();  // the average over ranks
      if (micro % 3 == 2) {
        optimizer.step();
        reference_optimizer.step();
      }
    }
    const double difference = largest_difference(model, reference);
    std::printf("rank %d: largest difference %.3g\n", rank, difference);
    return difference < kTolerance;
  }));
}

// A parameter that gets no gradient neither hangs the job nor blocks the
// buckets behind it; its gradient is the (zero) average.
TEST(Ddp, AnUnusedParameterDoesNotHang) {
  EXPECT_TRUE(on_ranks([](World& world) {
    Net model = make_net(true);
    ct::DdpOptions small;
    small.first_bucket_bytes = 64;
    small.bucket_bytes = 256;
    ct::DistributedDataParallel ddp(model.ptr(), world.communicator(), small);
    ::torch::optim::SGD optimizer(model->parameters(), 0.1);
    for (int step = 0; step < 3; ++step) {
      auto [inputs, targets] = batch(step);
      optimizer.zero_grad();
      ::torch::mse_loss(model->forward(slice(inputs, world.rank(), kRanks)),
                        slice(targets, world.rank(), kRanks))
          .backward();
      optimizer.step();
    }
    const at::Tensor& unused_grad = model->unused->weight.grad();
    const bool zero = unused_grad.defined() && unused_grad.abs().max().item<double>() == 0;
    std::printf("rank %d: 3 steps done, unused gradient zero: %d\n", world.rank(), zero ? 1 : 0);
    return zero;
  }));
}

TEST(Ddp, TensorCollectivesAndTheirTypes) {
  EXPECT_TRUE(on_ranks([](World& world) {
    Communicator& comm = world.communicator();
    at::Tensor ones = ::torch::ones({3}, ::torch::kInt64);
    ct::all_reduce(comm, ones);
    at::Tensor value = ::torch::full({2}, world.rank() == 0 ? 7.0 : 0.0, ::torch::kBFloat16);
    ct::broadcast(comm, value, 0);
    const at::Tensor gathered =
        ct::all_gather(comm, ::torch::full({2}, double(world.rank()), ::torch::kFloat64));
    // Mixed dtypes, one tensor not contiguous: one broadcast per dtype.
    const int fill = world.rank() == 0 ? 5 : 0;
    std::vector<at::Tensor> several{::torch::full({2, 3}, fill, ::torch::kFloat32).t(),
                                    ::torch::full({4}, fill, ::torch::kInt64),
                                    ::torch::full({1}, fill, ::torch::kFloat32)};
    ct::broadcast_coalesced(comm, several, 0);
    bool coalesced = true;
    for (const at::Tensor& tensor : several)
      coalesced = coalesced && (tensor == 5).all().item<bool>();
    coalesced = coalesced && several[0].sizes() == at::IntArrayRef({3, 2});
    bool refused = false;
    try {
      ct::data_type(::torch::ones({2}, ::torch::kBool));
    } catch (const cohort::InvalidArgument&) {
      refused = true;
    }
    return ones.equal(::torch::full({3}, kRanks, ::torch::kInt64)) &&
           value.equal(::torch::full({2}, 7.0, ::torch::kBFloat16)) &&
           gathered.sizes() == at::IntArrayRef({kRanks, 2}) && gathered[1][0].item<double>() == 1 &&
           coalesced && refused;
  }));
}

// The check: the ResNet-50 example under cohort run.
TEST(Ddp, ResNet50ExampleTrainsUnderCohortRun) {
  cohort::test::ProcessOptions options;
  options.timeout = std::chrono::seconds(300);
  const auto result = cohort::test::run_process(
      {COHORT_CLI_PATH, "run", "-n", "2", COHORT_RESNET50_PATH, "--synthetic", "--steps", "3",
       "--batch-size", "2", "--image-size", "64"},
      options);
  ASSERT_EQ(result.exit_code, 0) << cohort::test::describe(result);
  EXPECT_EQ(cohort::test::lines_with(result.out, ": loss ").size(), 3u) << result.out;
  EXPECT_EQ(cohort::test::lines_with(result.out, " images/s").size(), 3u) << result.out;
  EXPECT_EQ(cohort::test::lines_with(result.out, "total: ").size(), 1u) << result.out;
}

#if COHORT_TEST_WITH_STB
// A w x h image with a gradient, so decoding is not all zeros.
std::vector<unsigned char> pixels(int width, int height, int channels) {
  std::vector<unsigned char> data(static_cast<std::size_t>(width * height * channels));
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<unsigned char>(i * 7);
  return data;
}

void write_png(const std::filesystem::path& path, int width, int height, int channels) {
  std::filesystem::create_directories(path.parent_path());
  ASSERT_NE(stbi_write_png(path.c_str(), width, height, channels,
                           pixels(width, height, channels).data(), width * channels),
            0);
}

void write_jpg(const std::filesystem::path& path, int width, int height) {
  std::filesystem::create_directories(path.parent_path());
  ASSERT_NE(stbi_write_jpg(path.c_str(), width, height, 3, pixels(width, height, 3).data(), 90), 0);
}

// Binary PPM (P6), written by hand.
void write_ppm(const std::filesystem::path& path, int width, int height) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream file(path, std::ios::binary);
  file << "P6\n" << width << " " << height << "\n255\n";
  const auto data = pixels(width, height, 3);
  file.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}
#endif

// --data: 5 images of 4 formats and odd shapes in 2 classes, one in a
// nested folder, one grey; 2 ranks take 3 each per epoch (padded), one batch
// of 2 (the incomplete one dropped), so 4 steps are 4 epochs.
TEST(Ddp, ResNet50ExampleTrainsOnAnImageFolder) {
#if !COHORT_TEST_WITH_STB
  COHORT_SKIP_MISSING("libstb-dev is not installed: resnet50_ddp cannot decode images");
#else
  cohort::test::TempDir dir("cohort-images");
  const auto root = dir.path() / "train";
  write_png(root / "ants" / "a.png", 40, 30, 3);
  write_jpg(root / "ants" / "more" / "b.JPG", 30, 50);
  write_ppm(root / "bees" / "c.ppm", 20, 20);
  write_png(root / "bees" / "d.png", 33, 17, 1);
  write_jpg(root / "bees" / "e.jpeg", 64, 48);
  std::ofstream(root / "bees" / "notes.txt") << "not an image, skipped\n";
  cohort::test::ProcessOptions options;
  options.timeout = std::chrono::seconds(300);
  const auto result = cohort::test::run_process(
      {COHORT_CLI_PATH, "run", "-n", "2", COHORT_RESNET50_PATH, "--data", root.string(), "--steps",
       "4", "--batch-size", "2", "--image-size", "32"},
      options);
  ASSERT_EQ(result.exit_code, 0) << cohort::test::describe(result);
  EXPECT_EQ(cohort::test::lines_with(result.out, "data: 5 images in 2 classes").size(), 1u)
      << result.out;
  EXPECT_EQ(cohort::test::lines_with(result.out, "3 per rank per epoch").size(), 1u) << result.out;
  EXPECT_EQ(cohort::test::lines_with(result.out, ": loss ").size(), 4u) << result.out;
  EXPECT_EQ(cohort::test::lines_with(result.out, "total: ").size(), 1u) << result.out;

  // A file that is not what its name says: the error names it.
  std::ofstream(root / "bees" / "broken.png") << "not a png";
  const auto broken =
      cohort::test::run_process({COHORT_RESNET50_PATH, "--data", root.string(), "--steps", "3",
                                 "--batch-size", "6", "--image-size", "32"},
                                options);
  EXPECT_EQ(broken.exit_code, 1) << cohort::test::describe(broken);
  EXPECT_NE(broken.err.find("broken.png: cannot decode"), std::string::npos)
      << cohort::test::describe(broken);
#endif
}

TEST(Ddp, ResNet50ExampleSaysWhatIsWrongWithTheDataFolder) {
  cohort::test::TempDir dir("cohort-images");
  const auto empty = cohort::test::run_process(
      {COHORT_RESNET50_PATH, "--data", dir.path().string(), "--steps", "1"});
  EXPECT_EQ(empty.exit_code, COHORT_TEST_WITH_STB ? 1 : 2) << cohort::test::describe(empty);
  EXPECT_NE(empty.err.find(COHORT_TEST_WITH_STB ? "no subfolders" : "install libstb-dev"),
            std::string::npos)
      << cohort::test::describe(empty);
  const auto both = cohort::test::run_process(
      {COHORT_RESNET50_PATH, "--synthetic", "--data", dir.path().string()});
  EXPECT_EQ(both.exit_code, 2) << cohort::test::describe(both);
  EXPECT_NE(both.err.find("exactly one of --synthetic and --data"), std::string::npos)
      << cohort::test::describe(both);
}

TEST(DistributedSampler, ShardsAreDisjointPaddedAndShuffledPerEpoch) {
  ct::DistributedSampler first(10, 0, 3, true, 42);
  ct::DistributedSampler second(10, 1, 3, true, 42);
  ct::DistributedSampler third(10, 2, 3, true, 42);
  EXPECT_EQ(first.size(), 4u);  // 10 over 3 ranks, padded to 12
  std::vector<std::size_t> all;
  for (auto* sampler : {&first, &second, &third}) {
    const auto mine = sampler->indices();
    EXPECT_EQ(mine.size(), 4u);
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()) - all.begin(), 10);  // every index, 2 repeated
  const auto epoch0 = first.indices();
  first.set_epoch(1);
  EXPECT_NE(first.indices(), epoch0);
  ct::DistributedSampler cut(10, 0, 3, false, 0, true);
  EXPECT_EQ(cut.indices(), (std::vector<std::size_t>{0, 3, 6}));
}

}  // namespace
