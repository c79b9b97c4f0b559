// DistributedDataParallel on cohort's communicator. Each parameter's
// AccumulateGrad node gets a post-hook (LibTorch 1.13's C++ API has no
// post-accumulate hook of its own; this is what c10d's Reducer does), which
// marks the gradient ready in its bucket once it is complete (copying it in
// unless it already lives there as a view); a bucket whose gradients are all
// in is all-reduced on the communicator's queue while backward goes on,
// buckets strictly in order so every rank issues the same collectives; an
// end-of-backward callback finishes the rest and copies the averages back to
// gradients that do not live in their bucket. Where overlapping would only
// make backward and the all-reduce fight for the same cores
// (DdpOptions::overlap), the buckets are all-reduced after backward instead.
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <cohort/errors.hpp>
#include <cohort/torch.hpp>

#include "core/cpus.hpp"
#include "core/strings.hpp"

namespace cohort::torch {

using detail::cat;

struct DistributedDataParallel::Bucket {
  at::Tensor flat;                // the gradients of its parameters, end to end
  std::vector<at::Tensor> views;  // each parameter's part of `flat`, shaped like it
  std::vector<bool> ready;
  std::size_t pending = 0;  // gradients not yet ready in this backward
  Work work;
};

namespace {

// Reverse registration order (roughly the order backward produces the
// gradients), a small first bucket, one dtype per bucket.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<at::Tensor>& parameters,
                                                     const DdpOptions& options) {
  std::vector<std::vector<std::size_t>> buckets;
  std::size_t bytes = 0;
  for (std::size_t i = parameters.size(); i-- > 0;) {
    const at::Tensor& parameter = parameters[i];
    const std::size_t cap = buckets.size() == 1 ? options.first_bucket_bytes : options.bucket_bytes;
    const bool new_dtype = !buckets.empty() && parameters[buckets.back().front()].scalar_type() !=
                                                   parameter.scalar_type();
    if (buckets.empty() || bytes >= cap || new_dtype) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(i);
    bytes += static_cast<std::size_t>(parameter.numel()) * parameter.element_size();
  }
  return buckets;
}

// DdpOptions::Overlap::automatic, decided: not when the all-reduce is CPU
// work on this host (shm) and backward's threads already fill its CPUs.
bool decide_overlap(DdpOptions::Overlap overlap, const Communicator& comm) {
  if (overlap != DdpOptions::Overlap::automatic) return overlap == DdpOptions::Overlap::always;
  if (comm.backend() != "shm") return true;
  return comm.size() * at::get_num_threads() < detail::usable_cpus();
}

// A bucket's storage: on the CPU, the communicator's own memory, which shm
// all-reduces in place in every rank's copy (Communicator::allocate; every
// rank makes the same buckets in the same order, as allocate asks).
at::Tensor bucket_storage(Communicator& comm, std::int64_t size, const at::TensorOptions& options) {
  if (!options.device().is_cpu()) return at::zeros({size}, options);
  std::shared_ptr<void> memory =
      comm.allocate(static_cast<std::size_t>(size) * options.dtype().itemsize());
  void* data = memory.get();
  return at::from_blob(
      data, {size}, [memory = std::move(memory)](void*) mutable { memory.reset(); }, options);
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<::torch::nn::Module> module,
                                                 Communicator& comm, DdpOptions options)
    : module_(std::move(module)), comm_(comm), options_(options) {
  if (!module_) throw InvalidArgument("DistributedDataParallel: no module");
  overlap_ = decide_overlap(options_.overlap, comm_);
  for (at::Tensor& parameter : module_->parameters()) {
    if (parameter.requires_grad()) parameters_.push_back(parameter);
  }
  // Every rank starts from rank 0's parameters and buffers.
  broadcast_coalesced(comm_, module_->parameters(), 0);
  buffers_ = module_->buffers();
  broadcast_coalesced(comm_, buffers_, 0);
  buckets_ = assign_buckets(parameters_, options_);
  bucket_of_.assign(parameters_.size(), 0);
  position_of_.assign(parameters_.size(), 0);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    auto bucket = std::make_unique<Bucket>();
    std::vector<std::int64_t> offsets;
    std::int64_t size = 0;
    for (std::size_t index : buckets_[b]) {
      bucket_of_[index] = b;
      position_of_[index] = offsets.size();
      offsets.push_back(size);
      size += parameters_[index].numel();
    }
    bucket->flat = bucket_storage(comm_, size, parameters_[buckets_[b].front()].options());
    for (std::size_t k = 0; k < buckets_[b].size(); ++k) {
      // Shares `flat`'s storage without being an autograd view, which
      // Optimizer::zero_grad's detach_() would refuse.
      bucket->views.push_back(
          at::empty({0}, bucket->flat.options())
              .set_(bucket->flat.storage(), offsets[k], parameters_[buckets_[b][k]].sizes()));
    }
    bucket->ready.assign(buckets_[b].size(), false);
    state_.push_back(std::move(bucket));
  }
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    auto accumulator = ::torch::autograd::impl::grad_accumulator(parameters_[i]);
    accumulator->add_post_hook(std::make_unique<::torch::autograd::utils::LambdaPostHook>(
        [this, i](const ::torch::autograd::variable_list& outputs,
                  const ::torch::autograd::variable_list&) {
          on_gradient(i);
          return outputs;
        }));
    accumulators_.push_back(std::move(accumulator));  // the parameter only holds a weak_ptr
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  // The hooks capture `this`: a backward after this point must not reach them.
  for (auto& accumulator : accumulators_) {
    auto& hooks = accumulator->post_hooks();
    hooks.clear();
  }
}

void DistributedDataParallel::sync_buffers() {
  if (options_.broadcast_buffers) broadcast_coalesced(comm_, buffers_, 0);
}

void DistributedDataParallel::on_gradient(std::size_t parameter) {
  if (!syncing_) return;
  if (!in_backward_) {
    in_backward_ = true;
    next_launch_ = 0;
    for (auto& bucket : state_) {
      bucket->pending = bucket->ready.size();
      std::fill(bucket->ready.begin(), bucket->ready.end(), false);
    }
    ::torch::autograd::Engine::get_default_engine().queue_callback([this] { finish_backward(); });
  }
  const std::size_t b = bucket_of_[parameter];
  Bucket& bucket = *state_[b];
  const std::size_t position = position_of_[parameter];
  if (bucket.ready[position]) return;  // a parameter used twice: its gradient is complete now
  at::Tensor& view = bucket.views[position];
  at::Tensor& gradient = parameters_[parameter].mutable_grad();
  if (!gradient.defined()) {
    view.zero_();
  } else if (!gradient.is_same(view)) {
    view.copy_(gradient);
    if (options_.gradient_as_bucket_view) gradient = view;
  }  // else: backward accumulated straight into the bucket
  bucket.ready[position] = true;
  --bucket.pending;
  launch_ready_buckets();
}

void DistributedDataParallel::launch_ready_buckets() {
  if (!overlap_ && in_backward_) return;  // finish_backward launches them all
  while (next_launch_ < state_.size() && state_[next_launch_]->pending == 0) {
    Bucket& bucket = *state_[next_launch_];
    bucket.work = all_reduce_async(comm_, bucket.flat, ReduceOp::avg);
    ++next_launch_;
  }
}

void DistributedDataParallel::finish_backward() {
  in_backward_ = false;
  // Parameters the graph did not reach contribute zeros, so that every rank
  // all-reduces every bucket, in the same order.
  for (std::size_t b = 0; b < state_.size(); ++b) {
    Bucket& bucket = *state_[b];
    for (std::size_t k = 0; k < bucket.ready.size(); ++k) {
      if (bucket.ready[k]) continue;
      bucket.views[k].zero_();
      bucket.ready[k] = true;
      --bucket.pending;
    }
  }
  launch_ready_buckets();
  for (std::size_t b = 0; b < state_.size(); ++b) {
    Bucket& bucket = *state_[b];
    bucket.work.wait();
    for (std::size_t k = 0; k < buckets_[b].size(); ++k) {
      const at::Tensor& average = bucket.views[k];
      at::Tensor& gradient = parameters_[buckets_[b][k]].mutable_grad();
      if (gradient.is_same(average)) continue;  // averaged in place
      if (gradient.defined()) {
        gradient.copy_(average);
      } else {
        gradient = options_.gradient_as_bucket_view ? average : average.clone();
      }
    }
  }
}

}  // namespace cohort::torch
