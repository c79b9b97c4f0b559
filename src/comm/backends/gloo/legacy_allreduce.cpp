#include "comm/backends/gloo/legacy_allreduce.hpp"

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include <gloo/allreduce_ring.h>

#include "comm/reduce.hpp"

namespace cohort::detail::gloo_backend {
namespace {

// What Gloo sees of each element type: a type of the same size.
template <DataType D>
struct Storage;
template <>
struct Storage<DataType::f32> {
  using Type = float;
};
template <>
struct Storage<DataType::f64> {
  using Type = double;
};
template <>
struct Storage<DataType::f16> {
  using Type = std::uint16_t;
};
template <>
struct Storage<DataType::bf16> {
  using Type = std::uint16_t;
};
template <>
struct Storage<DataType::i8> {
  using Type = std::int8_t;
};
template <>
struct Storage<DataType::u8> {
  using Type = std::uint8_t;
};
template <>
struct Storage<DataType::i32> {
  using Type = std::int32_t;
};
template <>
struct Storage<DataType::i64> {
  using Type = std::int64_t;
};

// The ring reads and writes the user's buffer only in run() (it sends from
// its own outbox), so one ring serves any buffer of its size.
template <class T>
class RetargetableRing final : public ::gloo::AllreduceRing<T> {
 public:
  using ::gloo::AllreduceRing<T>::AllreduceRing;
  void run_on(T* data) {
    this->ptrs_[0] = data;
    this->run();
  }
};

template <DataType D, ReduceOp O>
void reduce_elements(typename Storage<D>::Type* accumulate, const typename Storage<D>::Type* input,
                     std::size_t count) {
  reduce_into(D, O == ReduceOp::avg ? ReduceOp::sum : O, accumulate, input, count);
}

template <DataType D>
const ::gloo::ReductionFunction<typename Storage<D>::Type>* reduction(ReduceOp op) {
  using Function = ::gloo::ReductionFunction<typename Storage<D>::Type>;
  static const Function kSum(::gloo::CUSTOM, &reduce_elements<D, ReduceOp::sum>);
  static const Function kProd(::gloo::CUSTOM, &reduce_elements<D, ReduceOp::prod>);
  static const Function kMin(::gloo::CUSTOM, &reduce_elements<D, ReduceOp::min>);
  static const Function kMax(::gloo::CUSTOM, &reduce_elements<D, ReduceOp::max>);
  switch (op) {
    case ReduceOp::prod:
      return &kProd;
    case ReduceOp::min:
      return &kMin;
    case ReduceOp::max:
      return &kMax;
    case ReduceOp::sum:
    case ReduceOp::avg:
      break;
  }
  return &kSum;
}

// The ring for a message of `count` elements of `D`, on the sync mesh when
// the message is small enough, erased to a run function over untyped data.
template <DataType D>
std::function<void(void*)> make_algorithm(const std::shared_ptr<::gloo::Context>& sync_mesh,
                                          const std::shared_ptr<::gloo::Context>& loop_mesh,
                                          ReduceOp op, std::size_t count) {
  using T = typename Storage<D>::Type;
  const bool sync = count * sizeof(T) <= LegacyAllreduce::kMaxSyncBytes;
  auto ring =
      std::make_shared<RetargetableRing<T>>(sync ? sync_mesh : loop_mesh, std::vector<T*>{nullptr},
                                            static_cast<int>(count), reduction<D>(op));
  return [ring](void* data) { ring->run_on(static_cast<T*>(data)); };
}

std::function<void(void*)> make_algorithm(const std::shared_ptr<::gloo::Context>& sync_mesh,
                                          const std::shared_ptr<::gloo::Context>& loop_mesh,
                                          DataType type, ReduceOp op, std::size_t count) {
  switch (type) {
    case DataType::f32:
      return make_algorithm<DataType::f32>(sync_mesh, loop_mesh, op, count);
    case DataType::f64:
      return make_algorithm<DataType::f64>(sync_mesh, loop_mesh, op, count);
    case DataType::f16:
      return make_algorithm<DataType::f16>(sync_mesh, loop_mesh, op, count);
    case DataType::bf16:
      return make_algorithm<DataType::bf16>(sync_mesh, loop_mesh, op, count);
    case DataType::i8:
      return make_algorithm<DataType::i8>(sync_mesh, loop_mesh, op, count);
    case DataType::u8:
      return make_algorithm<DataType::u8>(sync_mesh, loop_mesh, op, count);
    case DataType::i32:
      return make_algorithm<DataType::i32>(sync_mesh, loop_mesh, op, count);
    case DataType::i64:
      return make_algorithm<DataType::i64>(sync_mesh, loop_mesh, op, count);
  }
  return {};
}

}  // namespace

struct LegacyAllreduce::Entry {
  DataType type;
  ReduceOp op;  // avg shares sum's algorithms
  std::size_t count;
  std::function<void(void*)> run;
};

LegacyAllreduce::LegacyAllreduce(std::shared_ptr<::gloo::Context> sync_mesh,
                                 std::shared_ptr<::gloo::Context> loop_mesh,
                                 std::size_t max_entries)
    : sync_mesh_(std::move(sync_mesh)),
      loop_mesh_(std::move(loop_mesh)),
      max_entries_(max_entries) {}

LegacyAllreduce::~LegacyAllreduce() {
  release();
}

void LegacyAllreduce::release() noexcept {
  entries_.clear();
  sync_mesh_.reset();
  loop_mesh_.reset();
}

void LegacyAllreduce::run(Buffer data, ReduceOp op) {
  static_assert(kMaxBytes <= std::numeric_limits<int>::max());  // Gloo's int counts
  if (op == ReduceOp::avg) op = ReduceOp::sum;
  auto found = entries_.begin();
  while (found != entries_.end() &&
         !(found->type == data.type && found->op == op && found->count == data.count)) {
    ++found;
  }
  if (found == entries_.end()) {
    if (entries_.size() >= max_entries_) entries_.pop_back();
    entries_.push_front({data.type, op, data.count,
                         make_algorithm(sync_mesh_, loop_mesh_, data.type, op, data.count)});
  } else if (found != entries_.begin()) {
    entries_.splice(entries_.begin(), entries_, found);
  }
  entries_.front().run(data.data);
}

}  // namespace cohort::detail::gloo_backend
