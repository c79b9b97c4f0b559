// Tensors as the communicator's buffers: a contiguous CPU tensor is a
// pointer, a count and a dtype, so the collectives need no copy.
#include <cohort/errors.hpp>
#include <cohort/torch.hpp>

#include "core/strings.hpp"

namespace cohort::torch {

using detail::cat;

DataType data_type(const at::Tensor& tensor) {
  if (!tensor.defined()) throw InvalidArgument("cohort::torch: an undefined tensor");
  if (!tensor.device().is_cpu()) {
    throw InvalidArgument(cat("cohort::torch: a tensor on ", tensor.device().str(),
                              ": the gloo backend takes CPU tensors (.cpu() it, or wait for "
                              "the NCCL backend)"));
  }
  if (!tensor.is_contiguous()) {
    throw InvalidArgument("cohort::torch: a non-contiguous tensor: call .contiguous() first");
  }
  switch (tensor.scalar_type()) {
    case at::kFloat:
      return DataType::f32;
    case at::kDouble:
      return DataType::f64;
    case at::kHalf:
      return DataType::f16;
    case at::kBFloat16:
      return DataType::bf16;
    case at::kChar:
      return DataType::i8;
    case at::kByte:
      return DataType::u8;
    case at::kInt:
      return DataType::i32;
    case at::kLong:
      return DataType::i64;
    default:
      throw InvalidArgument(cat("cohort::torch: dtype ", c10::toString(tensor.scalar_type()),
                                " has no collective element type (float32, float64, float16, "
                                "bfloat16, int8, uint8, int32, int64)"));
  }
}

Buffer buffer(const at::Tensor& tensor) {
  const DataType type = data_type(tensor);
  return {tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()), type};
}

void all_reduce(Communicator& comm, at::Tensor& tensor, ReduceOp op) {
  comm.all_reduce(buffer(tensor), op);
}

Work all_reduce_async(Communicator& comm, at::Tensor& tensor, ReduceOp op) {
  return comm.all_reduce_async(buffer(tensor), op);
}

void broadcast(Communicator& comm, at::Tensor& tensor, int root) {
  comm.broadcast(buffer(tensor), root);
}

void broadcast_coalesced(Communicator& comm, const std::vector<at::Tensor>& tensors, int root) {
  ::torch::NoGradGuard no_grad;
  std::vector<bool> done(tensors.size(), false);
  for (std::size_t first = 0; first < tensors.size(); ++first) {
    if (done[first]) continue;
    // Every tensor of this one's dtype, in order (the same on every rank).
    std::vector<at::Tensor> group;
    for (std::size_t i = first; i < tensors.size(); ++i) {
      if (done[i] || tensors[i].scalar_type() != tensors[first].scalar_type()) continue;
      group.push_back(tensors[i].detach());
      done[i] = true;
    }
    std::vector<at::Tensor> flat_parts;
    flat_parts.reserve(group.size());
    for (const at::Tensor& tensor : group)
      flat_parts.push_back(tensor.reshape({-1}));
    at::Tensor flat = at::cat(flat_parts);
    broadcast(comm, flat, root);
    if (comm.rank() == root) continue;
    std::int64_t offset = 0;
    for (at::Tensor& tensor : group) {
      tensor.copy_(flat.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
      offset += tensor.numel();
    }
  }
}

at::Tensor all_gather(Communicator& comm, const at::Tensor& tensor) {
  std::vector<std::int64_t> shape{comm.size()};
  for (std::int64_t size : tensor.sizes())
    shape.push_back(size);
  at::Tensor output = at::empty(shape, tensor.options());
  comm.all_gather(buffer(tensor), buffer(output));
  return output;
}

}  // namespace cohort::torch
