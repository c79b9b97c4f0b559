// cohort::torch on real processes: each test spawns 2 ranks (cohort::spawn)
// that train with DistributedDataParallel and check themselves against a
// single-process reference computed locally from the same seeds. A rank's
// exit code is its verdict; the test passes when both ranks pass.
#include <cstdio>

#include <gtest/gtest.h>

#include <cohort/cohort.hpp>
#include <cohort/torch.hpp>

#include "support/subprocess.hpp"
#include "support/text.hpp"

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

TEST(Ddp, TwoRanksEndWhereOneRankOnTheCombinedBatchEnds) {
  EXPECT_TRUE(on_ranks([](World& world) {
    const int rank = world.rank();
    Net model = make_net();
    ct::DdpOptions small;  // several buckets for a small model
    small.first_bucket_bytes = 64;
    small.bucket_bytes = 256;
    ct::DistributedDataParallel ddp(model.ptr(), world.communicator(), small);
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
TEST(Ddp, GradientAccumulationUnderNoSync) {
  EXPECT_TRUE(on_ranks([](World& world) {
    const int rank = world.rank();
    Net model = make_net();
    ct::DistributedDataParallel ddp(model.ptr(), world.communicator());
    ::torch::optim::SGD optimizer(model->parameters(), 0.1);
    Net reference = make_net();
    ::torch::optim::SGD reference_optimizer(reference->parameters(), 0.1);
    optimizer.zero_grad();
    reference_optimizer.zero_grad();
    for (int micro = 0; micro < 3; ++micro) {
      auto [inputs, targets] = batch(micro);
      const auto loss = [&](Net& net, int r) {
        return ::torch::mse_loss(net->forward(slice(inputs, r, kRanks)), slice(targets, r, kRanks));
      };
      if (micro < 2) {
        auto guard = ddp.no_sync();
        loss(model, rank).backward();
      } else {
        loss(model, rank).backward();
      }
      for (int r = 0; r < kRanks; ++r)
        (loss(reference, r) / kRanks).backward();  // the average over ranks
    }
    optimizer.step();
    reference_optimizer.step();
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
    bool refused = false;
    try {
      ct::data_type(::torch::ones({2}, ::torch::kBool));
    } catch (const cohort::InvalidArgument&) {
      refused = true;
    }
    return ones.equal(::torch::full({3}, kRanks, ::torch::kInt64)) &&
           value.equal(::torch::full({2}, 7.0, ::torch::kBFloat16)) &&
           gathered.sizes() == at::IntArrayRef({kRanks, 2}) && gathered[1][0].item<double>() == 1 &&
           refused;
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
