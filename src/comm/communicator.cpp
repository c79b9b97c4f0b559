// The Communicator in front of every backend: checks arguments once for all
// of them, resolves default timeouts, skips calls with nothing to move, and
// queues `*_async` operations.
#include <cstdint>

#include <cohort/communicator.hpp>

#include "comm/async_queue.hpp"
#include "comm/backend.hpp"
#include "comm/kit/buffers.hpp"
#include "core/strings.hpp"

namespace cohort {
namespace {

using detail::cat;

void require_count(std::string_view collective, std::string_view what, const Buffer& buffer,
                   std::size_t expected) {
  if (buffer.count != expected) {
    throw InvalidArgument(
        cat(collective, ": ", what, " holds ", buffer.count, " elements, expected ", expected));
  }
}

void require_same_type(std::string_view collective, const Buffer& input, const Buffer& output) {
  if (input.type != output.type) {
    throw InvalidArgument(cat(collective, ": input is ", to_string(input.type), " but output is ",
                              to_string(output.type)));
  }
}

void require_rank(std::string_view collective, std::string_view role, int rank, int size) {
  if (rank < 0 || rank >= size) {
    throw InvalidArgument(
        cat(collective, ": ", role, " ", rank, " is not a rank of this group of ", size));
  }
}

// `part` may be `whole`'s slice number `slice` (in-place use; -1 allows no
// slice); any other overlap of the two is an error.
void require_no_overlap(std::string_view collective, const Buffer& part, const Buffer& whole,
                        int slice) {
  const auto part_begin = reinterpret_cast<std::uintptr_t>(part.data);
  const auto whole_begin = reinterpret_cast<std::uintptr_t>(whole.data);
  if (part.bytes() == 0 || whole.bytes() == 0) return;
  if (slice >= 0 && part_begin == whole_begin + static_cast<std::size_t>(slice) * part.bytes()) {
    return;
  }
  if (!detail::overlaps(part, whole)) return;
  if (slice < 0) {
    throw InvalidArgument(cat(collective,
                              ": input and output overlap; pass separate buffers, or the same "
                              "buffer for in-place use"));
  }
  throw InvalidArgument(cat(collective,
                            ": input and output overlap; pass separate buffers, or for in-place "
                            "use the slice at element offset ",
                            static_cast<std::size_t>(slice) * part.count, " of the larger one"));
}

using Duration = Communicator::Duration;
using Operation = std::function<void()>;

Duration resolve(const detail::Backend& backend, Duration timeout) {
  return timeout == Communicator::kDefaultTimeout ? backend.default_timeout() : timeout;
}

// One function per collective checks its arguments and returns the call to
// make (empty when there is nothing to move), shared by the blocking and the
// queued form.

Operation all_reduce_call(detail::Backend& backend, Buffer data, ReduceOp op, Duration timeout) {
  if (data.count == 0) return {};
  timeout = resolve(backend, timeout);
  return [&backend, data, op, timeout] { backend.all_reduce(data, op, timeout); };
}

Operation broadcast_call(detail::Backend& backend, Buffer data, int root, Duration timeout) {
  require_rank("broadcast", "root", root, backend.size());
  if (data.count == 0) return {};
  timeout = resolve(backend, timeout);
  return [&backend, data, root, timeout] { backend.broadcast(data, root, timeout); };
}

Operation reduce_call(detail::Backend& backend, Buffer data, ReduceOp op, int root,
                      Duration timeout) {
  require_rank("reduce", "root", root, backend.size());
  if (data.count == 0) return {};
  timeout = resolve(backend, timeout);
  return [&backend, data, op, root, timeout] { backend.reduce(data, op, root, timeout); };
}

Operation all_gather_call(detail::Backend& backend, Buffer input, Buffer output, Duration timeout) {
  require_same_type("all_gather", input, output);
  require_count("all_gather", "output", output,
                input.count * static_cast<std::size_t>(backend.size()));
  require_no_overlap("all_gather", input, output, backend.rank());
  if (input.count == 0) return {};
  timeout = resolve(backend, timeout);
  return [&backend, input, output, timeout] { backend.all_gather(input, output, timeout); };
}

Operation gather_call(detail::Backend& backend, Buffer input, Buffer output, int root,
                      Duration timeout) {
  require_rank("gather", "root", root, backend.size());
  if (backend.rank() == root) {
    require_same_type("gather", input, output);
    require_count("gather", "output", output,
                  input.count * static_cast<std::size_t>(backend.size()));
    require_no_overlap("gather", input, output, root);
  }
  if (input.count == 0) return {};
  timeout = resolve(backend, timeout);
  return [&backend, input, output, root, timeout] { backend.gather(input, output, root, timeout); };
}

Operation scatter_call(detail::Backend& backend, Buffer input, Buffer output, int root,
                       Duration timeout) {
  require_rank("scatter", "root", root, backend.size());
  if (backend.rank() == root) {
    require_same_type("scatter", input, output);
    require_count("scatter", "input", input,
                  output.count * static_cast<std::size_t>(backend.size()));
    require_no_overlap("scatter", output, input, root);
  }
  if (output.count == 0) return {};
  timeout = resolve(backend, timeout);
  return
      [&backend, input, output, root, timeout] { backend.scatter(input, output, root, timeout); };
}

Operation reduce_scatter_call(detail::Backend& backend, Buffer input, Buffer output, ReduceOp op,
                              Duration timeout) {
  require_same_type("reduce_scatter", input, output);
  require_count("reduce_scatter", "input", input,
                output.count * static_cast<std::size_t>(backend.size()));
  require_no_overlap("reduce_scatter", output, input, backend.rank());
  if (output.count == 0) return {};
  timeout = resolve(backend, timeout);
  return [&backend, input, output, op, timeout] {
    backend.reduce_scatter(input, output, op, timeout);
  };
}

Operation all_to_all_call(detail::Backend& backend, Buffer input, Buffer output, Duration timeout) {
  require_same_type("all_to_all", input, output);
  require_count("all_to_all", "output", output, input.count);
  if (input.count % static_cast<std::size_t>(backend.size()) != 0) {
    throw InvalidArgument(cat("all_to_all: input holds ", input.count,
                              " elements, not a multiple of the group size ", backend.size()));
  }
  if (input.data != output.data) require_no_overlap("all_to_all", input, output, -1);
  if (input.count == 0) return {};
  timeout = resolve(backend, timeout);
  return [&backend, input, output, timeout] { backend.all_to_all(input, output, timeout); };
}

Operation barrier_call(detail::Backend& backend, Duration timeout) {
  timeout = resolve(backend, timeout);
  return [&backend, timeout] { backend.barrier(timeout); };
}

Operation send_call(detail::Backend& backend, Buffer data, int peer, int tag, Duration timeout) {
  require_rank("send", "peer", peer, backend.size());
  if (data.count == 0) return {};
  timeout = resolve(backend, timeout);
  return [&backend, data, peer, tag, timeout] { backend.send(data, peer, tag, timeout); };
}

Operation recv_call(detail::Backend& backend, Buffer data, int peer, int tag, Duration timeout) {
  require_rank("recv", "peer", peer, backend.size());
  if (data.count == 0) return {};
  timeout = resolve(backend, timeout);
  return [&backend, data, peer, tag, timeout] { backend.recv(data, peer, tag, timeout); };
}

}  // namespace

Communicator::Communicator(std::unique_ptr<detail::Backend> backend)
    : backend_(std::move(backend)), queue_(std::make_unique<detail::AsyncQueue>()) {}

Communicator::~Communicator() = default;

int Communicator::rank() const noexcept {
  return backend_->rank();
}
int Communicator::size() const noexcept {
  return backend_->size();
}
std::string_view Communicator::backend() const noexcept {
  return backend_->name();
}
Communicator::Duration Communicator::default_timeout() const noexcept {
  return backend_->default_timeout();
}

std::shared_ptr<void> Communicator::allocate(std::size_t bytes, Duration timeout) {
  std::shared_ptr<void> memory;
  run(false, [&] { memory = backend_->allocate(bytes, resolve(*backend_, timeout)); });
  return memory;
}

Work Communicator::run(bool queued, std::function<void()> operation) {
  if (!operation) return Work();
  if (queued) return queue_->push(std::move(operation));
  queue_->drain();
  operation();
  return Work();
}

void Communicator::all_reduce(Buffer data, ReduceOp op, Duration timeout) {
  run(false, all_reduce_call(*backend_, data, op, timeout));
}
void Communicator::broadcast(Buffer data, int root, Duration timeout) {
  run(false, broadcast_call(*backend_, data, root, timeout));
}
void Communicator::reduce(Buffer data, ReduceOp op, int root, Duration timeout) {
  run(false, reduce_call(*backend_, data, op, root, timeout));
}
void Communicator::all_gather(Buffer input, Buffer output, Duration timeout) {
  run(false, all_gather_call(*backend_, input, output, timeout));
}
void Communicator::gather(Buffer input, Buffer output, int root, Duration timeout) {
  run(false, gather_call(*backend_, input, output, root, timeout));
}
void Communicator::scatter(Buffer input, Buffer output, int root, Duration timeout) {
  run(false, scatter_call(*backend_, input, output, root, timeout));
}
void Communicator::reduce_scatter(Buffer input, Buffer output, ReduceOp op, Duration timeout) {
  run(false, reduce_scatter_call(*backend_, input, output, op, timeout));
}
void Communicator::all_to_all(Buffer input, Buffer output, Duration timeout) {
  run(false, all_to_all_call(*backend_, input, output, timeout));
}
void Communicator::barrier(Duration timeout) {
  run(false, barrier_call(*backend_, timeout));
}
void Communicator::send(Buffer data, int peer, int tag, Duration timeout) {
  run(false, send_call(*backend_, data, peer, tag, timeout));
}
void Communicator::recv(Buffer data, int peer, int tag, Duration timeout) {
  run(false, recv_call(*backend_, data, peer, tag, timeout));
}

Work Communicator::all_reduce_async(Buffer data, ReduceOp op, Duration timeout) {
  return run(true, all_reduce_call(*backend_, data, op, timeout));
}
Work Communicator::broadcast_async(Buffer data, int root, Duration timeout) {
  return run(true, broadcast_call(*backend_, data, root, timeout));
}
Work Communicator::reduce_async(Buffer data, ReduceOp op, int root, Duration timeout) {
  return run(true, reduce_call(*backend_, data, op, root, timeout));
}
Work Communicator::all_gather_async(Buffer input, Buffer output, Duration timeout) {
  return run(true, all_gather_call(*backend_, input, output, timeout));
}
Work Communicator::gather_async(Buffer input, Buffer output, int root, Duration timeout) {
  return run(true, gather_call(*backend_, input, output, root, timeout));
}
Work Communicator::scatter_async(Buffer input, Buffer output, int root, Duration timeout) {
  return run(true, scatter_call(*backend_, input, output, root, timeout));
}
Work Communicator::reduce_scatter_async(Buffer input, Buffer output, ReduceOp op,
                                        Duration timeout) {
  return run(true, reduce_scatter_call(*backend_, input, output, op, timeout));
}
Work Communicator::all_to_all_async(Buffer input, Buffer output, Duration timeout) {
  return run(true, all_to_all_call(*backend_, input, output, timeout));
}
Work Communicator::barrier_async(Duration timeout) {
  return run(true, barrier_call(*backend_, timeout));
}
Work Communicator::send_async(Buffer data, int peer, int tag, Duration timeout) {
  return run(true, send_call(*backend_, data, peer, tag, timeout));
}
Work Communicator::recv_async(Buffer data, int peer, int tag, Duration timeout) {
  return run(true, recv_call(*backend_, data, peer, tag, timeout));
}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  queue_->drain();
  std::unique_ptr<detail::Backend> part = backend_->split(color, key);
  if (!part) return nullptr;
  return std::make_unique<Communicator>(std::move(part));
}

}  // namespace cohort
