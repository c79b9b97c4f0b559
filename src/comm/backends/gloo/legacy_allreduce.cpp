#include "comm/backends/gloo/legacy_allreduce.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

#include <gloo/allreduce_ring.h>

#include "comm/backends/gloo/element_types.hpp"
#include "comm/reduce.hpp"

namespace cohort::detail::gloo_backend {
namespace {

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
void reduce_elements(StorageOf<D>* accumulate, const StorageOf<D>* input, std::size_t count) {
  reduce_into(D, O == ReduceOp::avg ? ReduceOp::sum : O, accumulate, input, count);
}

template <DataType D>
const ::gloo::ReductionFunction<StorageOf<D>>* reduction(ReduceOp op) {
  using Function = ::gloo::ReductionFunction<StorageOf<D>>;
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
  using T = StorageOf<D>;
  const bool sync = count * sizeof(T) <= kMaxSyncBytes;
  auto ring =
      std::make_shared<RetargetableRing<T>>(sync ? sync_mesh : loop_mesh, std::vector<T*>{nullptr},
                                            static_cast<int>(count), reduction<D>(op));
  return [ring](void* data) { ring->run_on(static_cast<T*>(data)); };
}

std::function<void(void*)> make_algorithm(const std::shared_ptr<::gloo::Context>& sync_mesh,
                                          const std::shared_ptr<::gloo::Context>& loop_mesh,
                                          DataType type, ReduceOp op, std::size_t count) {
  return with_type(type, [&](auto tag) {
    return make_algorithm<decltype(tag)::value>(sync_mesh, loop_mesh, op, count);
  });
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

bool LegacyAllreduce::in_pieces(std::size_t bytes) const noexcept {
  return bytes > kMaxSyncBytes &&
         all_reduce_on_sync_ring(bytes, static_cast<std::size_t>(sync_mesh_->size));
}

void LegacyAllreduce::run(Buffer data, ReduceOp op) {
  static_assert(kMaxBytes <= std::numeric_limits<int>::max());  // Gloo's int counts
  if (op == ReduceOp::avg) op = ReduceOp::sum;
  if (in_pieces(data.bytes())) {
    const std::size_t piece = kMaxSyncBytes / size_of(data.type);
    for (std::size_t first = 0; first < data.count; first += piece) {
      run_whole({static_cast<unsigned char*>(data.data) + first * size_of(data.type),
                 std::min(piece, data.count - first), data.type},
                op);
    }
    return;
  }
  run_whole(data, op);
}

void LegacyAllreduce::run_whole(Buffer data, ReduceOp op) {
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
