// cohort::torch: data-parallel training for LibTorch models on cohort's own
// communicator (built when CMake finds LibTorch: COHORT_WITH_TORCH; link
// cohort::torch). What Python users have with torch.distributed and
// DistributedDataParallel, for the C++ frontend, which has neither.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include <cohort/communicator.hpp>

namespace cohort::torch {

/// The communicator's element type for a tensor's dtype (float32, float64,
/// float16, bfloat16, int8, uint8, int32, int64). Throws InvalidArgument,
/// naming the dtype, for any other, and for a tensor that is not a
/// contiguous CPU tensor (CUDA tensors arrive with the NCCL backend).
DataType data_type(const at::Tensor& tensor);

/// The tensor as the communicator's Buffer (no copy).
Buffer buffer(const at::Tensor& tensor);

/// torch.distributed's collectives on tensors, in place like theirs.
void all_reduce(Communicator& comm, at::Tensor& tensor, ReduceOp op = ReduceOp::sum);
Work all_reduce_async(Communicator& comm, at::Tensor& tensor, ReduceOp op = ReduceOp::sum);
void broadcast(Communicator& comm, at::Tensor& tensor, int root);
/// Broadcasts many tensors (of any shapes, contiguous or not) with one
/// collective per dtype instead of one per tensor, through a flat copy:
/// c10d's broadcast_coalesced, for a module's parameters or buffers.
void broadcast_coalesced(Communicator& comm, const std::vector<at::Tensor>& tensors, int root);
/// Every rank's `tensor`, stacked: shape [comm.size(), ...].
at::Tensor all_gather(Communicator& comm, const at::Tensor& tensor);

struct DdpOptions {
  /// Gradients are all-reduced in buckets of about this many bytes, the
  /// parameters in reverse registration order (the order backward produces
  /// their gradients), so communication overlaps the rest of backward.
  std::size_t bucket_bytes = 25u << 20;
  /// The first bucket is smaller, so that communication starts early.
  std::size_t first_bucket_bytes = 1u << 20;
  /// Broadcast the buffers (batch-norm statistics) from rank 0 before every
  /// forward, as PyTorch's DDP does; see sync_buffers().
  bool broadcast_buffers = true;
  /// After their first backward, parameters' .grad() tensors share memory
  /// with the buckets, so gradients are neither copied into a bucket before
  /// the all-reduce nor back after it (PyTorch's gradient_as_bucket_view,
  /// which is off there by default). Replacing a .grad() is allowed: the
  /// next backward copies it in and shares again.
  bool gradient_as_bucket_view = true;
  /// When a full bucket's all-reduce starts: during backward, overlapping
  /// the rest of it, or once backward is done. `automatic` overlaps unless
  /// the communication itself needs the cores backward uses: over the shm
  /// backend the all-reduce is copies and sums on this host's CPUs, and when
  /// the ranks' compute threads (ranks × at::get_num_threads()) fill those
  /// CPUs, running it beside backward only makes both wait for cores (on 2
  /// cores, 2 ranks: +11.5 ms per ResNet-18 step overlapped, about 0 after;
  /// bench/README.md).
  enum class Overlap { automatic, always, never };
  Overlap overlap = Overlap::automatic;
};

/// Wraps a module for data-parallel training. At construction its parameters
/// and buffers are broadcast from rank 0, so every rank starts alike. During
/// backward each gradient, once accumulated, is in its bucket (it lives
/// there, see DdpOptions::gradient_as_bucket_view, or is copied in); a full
/// bucket is all-reduced asynchronously (buckets strictly in order, the same
/// on every rank), and at the end of backward, before backward() returns,
/// every gradient holds the average, so optimizer.step() sees it.
/// Parameters that got no gradient in a backward contribute zeros (and their
/// gradient becomes the average of the others'), so a model whose graph
/// skips a parameter does not hang. Use from one thread; every rank must
/// call backward the same number of times.
class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<::torch::nn::Module> module, Communicator& comm,
                          DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  ::torch::nn::Module& module() { return *module_; }
  /// Whether all-reduces start during backward (DdpOptions::overlap, decided).
  bool overlaps_backward() const noexcept { return overlap_; }

  /// Broadcasts the module's buffers (those it had at construction, updated
  /// in place as batch norm does) from rank 0, one collective per dtype; call
  /// before forward when DdpOptions::broadcast_buffers, a no-op otherwise.
  void sync_buffers();

  /// While one lives, backward only accumulates gradients locally (gradient
  /// accumulation); the next backward outside it all-reduces the sum.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp) { ddp_.syncing_ = false; }
    ~NoSync() { ddp_.syncing_ = true; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
  };
  NoSync no_sync() { return NoSync(*this); }

  /// The buckets, as indices into module().parameters() (for tests and logs).
  const std::vector<std::vector<std::size_t>>& buckets() const noexcept { return buckets_; }

 private:
  struct Bucket;
  void on_gradient(std::size_t parameter);
  void launch_ready_buckets();
  void finish_backward();

  std::shared_ptr<::torch::nn::Module> module_;
  Communicator& comm_;
  DdpOptions options_;
  std::vector<at::Tensor> parameters_;
  std::vector<at::Tensor> buffers_;  ///< the module's, as at construction (as PyTorch's DDP)
  std::vector<std::shared_ptr<::torch::autograd::Node>> accumulators_;  // keep the hooks alive
  std::vector<std::vector<std::size_t>> buckets_;
  std::vector<std::size_t> bucket_of_;    ///< parameter -> bucket
  std::vector<std::size_t> position_of_;  ///< parameter -> its place in that bucket
  std::vector<std::unique_ptr<Bucket>> state_;
  std::size_t next_launch_ = 0;  ///< buckets launch in order, the same on every rank
  bool in_backward_ = false;
  bool overlap_ = true;
  bool syncing_ = true;
};

/// torch.utils.data.DistributedSampler: this rank's share of a dataset's
/// indices. With `shuffle`, the order is a permutation seeded by `seed` and
/// the epoch (set_epoch), the same on every rank; the dataset is padded by
/// repeating indices (or, with `drop_last`, cut) so every rank gets the same
/// number. Rank r takes every size()-th index starting at r.
class DistributedSampler {
 public:
  DistributedSampler(std::size_t dataset_size, int rank, int world_size, bool shuffle = true,
                     std::uint64_t seed = 0, bool drop_last = false);
  void set_epoch(std::uint64_t epoch) noexcept { epoch_ = epoch; }
  /// This rank's indices for the current epoch.
  std::vector<std::size_t> indices() const;
  /// How many indices each rank gets per epoch.
  std::size_t size() const noexcept { return per_rank_; }

 private:
  std::size_t dataset_size_;
  int rank_;
  int world_size_;
  bool shuffle_;
  std::uint64_t seed_;
  std::size_t per_rank_;
  std::uint64_t epoch_ = 0;
};

}  // namespace cohort::torch
