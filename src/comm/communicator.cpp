// The Communicator in front of every backend: checks arguments once for all
// of them, resolves default timeouts, skips calls with nothing to move,
// checks each collective against the other ranks' when asked (checked
// calls: call_check.hpp), and queues `*_async` operations.
#include <cstdint>
#include <optional>

#include <cohort/communicator.hpp>

#include "comm/async_queue.hpp"
#include "comm/backend.hpp"
#include "comm/call_check.hpp"
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
using Print = detail::CallPrint;
using Kind = Print::Kind;

Duration resolve(const detail::Backend& backend, Duration timeout) {
  return timeout == Communicator::kDefaultTimeout ? backend.default_timeout() : timeout;
}

// A call as planned: what to run (empty when there is nothing to move), and
// for a collective what every rank must agree on (checked calls).
struct Planned {
  Operation operation;
  std::optional<Print> print;  // none for send and recv
  Duration timeout{};
};

Print print_of(Kind kind, const Buffer& data, std::optional<ReduceOp> op = std::nullopt,
               int root = -1) {
  Print print;
  print.kind = kind;
  print.type = static_cast<std::uint8_t>(data.type);
  if (op) print.op = static_cast<std::uint8_t>(*op);
  print.root = root;
  print.count = data.count;
  return print;
}

// The operation to run: with checked calls, a collective's print goes to
// every rank first (call_check.hpp), also where this rank has nothing to
// move (another may have, and would wait for it).
Operation to_run(detail::Backend& backend, bool checked, Planned planned) {
  if (!checked || !planned.print) return std::move(planned.operation);
  return [&backend, print = *planned.print, timeout = planned.timeout,
          operation = std::move(planned.operation)] {
    detail::check_call(backend, print, timeout);
    if (operation) operation();
  };
}

// One function per collective checks its arguments and plans the call,
// shared by the blocking and the queued form.

Planned all_reduce_call(detail::Backend& backend, Buffer data, ReduceOp op, Duration timeout) {
  Planned planned{{}, print_of(Kind::all_reduce, data, op), resolve(backend, timeout)};
  if (data.count == 0) return planned;
  timeout = planned.timeout;
  planned.operation = [&backend, data, op, timeout] { backend.all_reduce(data, op, timeout); };
  return planned;
}

Planned broadcast_call(detail::Backend& backend, Buffer data, int root, Duration timeout) {
  require_rank("broadcast", "root", root, backend.size());
  Planned planned{
      {}, print_of(Kind::broadcast, data, std::nullopt, root), resolve(backend, timeout)};
  if (data.count == 0) return planned;
  timeout = planned.timeout;
  planned.operation = [&backend, data, root, timeout] { backend.broadcast(data, root, timeout); };
  return planned;
}

Planned reduce_call(detail::Backend& backend, Buffer data, ReduceOp op, int root,
                    Duration timeout) {
  require_rank("reduce", "root", root, backend.size());
  Planned planned{{}, print_of(Kind::reduce, data, op, root), resolve(backend, timeout)};
  if (data.count == 0) return planned;
  timeout = planned.timeout;
  planned.operation = [&backend, data, op, root, timeout] {
    backend.reduce(data, op, root, timeout);
  };
  return planned;
}

Planned all_gather_call(detail::Backend& backend, Buffer input, Buffer output, Duration timeout) {
  require_same_type("all_gather", input, output);
  require_count("all_gather", "output", output,
                input.count * static_cast<std::size_t>(backend.size()));
  require_no_overlap("all_gather", input, output, backend.rank());
  Planned planned{{}, print_of(Kind::all_gather, input), resolve(backend, timeout)};
  if (input.count == 0) return planned;
  timeout = planned.timeout;
  planned.operation = [&backend, input, output, timeout] {
    backend.all_gather(input, output, timeout);
  };
  return planned;
}

Planned gather_call(detail::Backend& backend, Buffer input, Buffer output, int root,
                    Duration timeout) {
  require_rank("gather", "root", root, backend.size());
  if (backend.rank() == root) {
    require_same_type("gather", input, output);
    require_count("gather", "output", output,
                  input.count * static_cast<std::size_t>(backend.size()));
    require_no_overlap("gather", input, output, root);
  }
  Planned planned{{}, print_of(Kind::gather, input, std::nullopt, root), resolve(backend, timeout)};
  if (input.count == 0) return planned;
  timeout = planned.timeout;
  planned.operation = [&backend, input, output, root, timeout] {
    backend.gather(input, output, root, timeout);
  };
  return planned;
}

Planned scatter_call(detail::Backend& backend, Buffer input, Buffer output, int root,
                     Duration timeout) {
  require_rank("scatter", "root", root, backend.size());
  if (backend.rank() == root) {
    require_same_type("scatter", input, output);
    require_count("scatter", "input", input,
                  output.count * static_cast<std::size_t>(backend.size()));
    require_no_overlap("scatter", output, input, root);
  }
  Planned planned{
      {}, print_of(Kind::scatter, output, std::nullopt, root), resolve(backend, timeout)};
  if (output.count == 0) return planned;
  timeout = planned.timeout;
  planned.operation = [&backend, input, output, root, timeout] {
    backend.scatter(input, output, root, timeout);
  };
  return planned;
}

Planned reduce_scatter_call(detail::Backend& backend, Buffer input, Buffer output, ReduceOp op,
                            Duration timeout) {
  require_same_type("reduce_scatter", input, output);
  require_count("reduce_scatter", "input", input,
                output.count * static_cast<std::size_t>(backend.size()));
  require_no_overlap("reduce_scatter", output, input, backend.rank());
  Planned planned{{}, print_of(Kind::reduce_scatter, output, op), resolve(backend, timeout)};
  if (output.count == 0) return planned;
  timeout = planned.timeout;
  planned.operation = [&backend, input, output, op, timeout] {
    backend.reduce_scatter(input, output, op, timeout);
  };
  return planned;
}

Planned all_to_all_call(detail::Backend& backend, Buffer input, Buffer output, Duration timeout) {
  require_same_type("all_to_all", input, output);
  require_count("all_to_all", "output", output, input.count);
  if (input.count % static_cast<std::size_t>(backend.size()) != 0) {
    throw InvalidArgument(cat("all_to_all: input holds ", input.count,
                              " elements, not a multiple of the group size ", backend.size()));
  }
  if (input.data != output.data) require_no_overlap("all_to_all", input, output, -1);
  Planned planned{{}, print_of(Kind::all_to_all, input), resolve(backend, timeout)};
  if (input.count == 0) return planned;
  timeout = planned.timeout;
  planned.operation = [&backend, input, output, timeout] {
    backend.all_to_all(input, output, timeout);
  };
  return planned;
}

Planned barrier_call(detail::Backend& backend, Duration timeout) {
  Print print;
  print.kind = Kind::barrier;
  Planned planned{{}, print, resolve(backend, timeout)};
  timeout = planned.timeout;
  planned.operation = [&backend, timeout] { backend.barrier(timeout); };
  return planned;
}

Planned send_call(detail::Backend& backend, Buffer data, int peer, int tag, Duration timeout) {
  require_rank("send", "peer", peer, backend.size());
  Planned planned{{}, std::nullopt, resolve(backend, timeout)};
  if (data.count == 0) return planned;
  timeout = planned.timeout;
  planned.operation = [&backend, data, peer, tag, timeout] {
    backend.send(data, peer, tag, timeout);
  };
  return planned;
}

Planned recv_call(detail::Backend& backend, Buffer data, int peer, int tag, Duration timeout) {
  require_rank("recv", "peer", peer, backend.size());
  Planned planned{{}, std::nullopt, resolve(backend, timeout)};
  if (data.count == 0) return planned;
  timeout = planned.timeout;
  planned.operation = [&backend, data, peer, tag, timeout] {
    backend.recv(data, peer, tag, timeout);
  };
  return planned;
}

}  // namespace

Communicator::Communicator(std::unique_ptr<detail::Backend> backend)
    : backend_(std::move(backend)),
      check_calls_(detail::check_calls_from_environment()),
      queue_(std::make_unique<detail::AsyncQueue>()) {}

void Communicator::check_calls(bool on) noexcept {
  queue_->drain();
  check_calls_ = on;
}

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
  run(false, [&] {
    timeout = resolve(*backend_, timeout);
    if (check_calls_) {
      Print print;
      print.kind = Kind::allocate;
      print.count = bytes;
      detail::check_call(*backend_, print, timeout);
    }
    memory = backend_->allocate(bytes, timeout);
  });
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
  run(false, to_run(*backend_, check_calls_, all_reduce_call(*backend_, data, op, timeout)));
}
void Communicator::broadcast(Buffer data, int root, Duration timeout) {
  run(false, to_run(*backend_, check_calls_, broadcast_call(*backend_, data, root, timeout)));
}
void Communicator::reduce(Buffer data, ReduceOp op, int root, Duration timeout) {
  run(false, to_run(*backend_, check_calls_, reduce_call(*backend_, data, op, root, timeout)));
}
void Communicator::all_gather(Buffer input, Buffer output, Duration timeout) {
  run(false, to_run(*backend_, check_calls_, all_gather_call(*backend_, input, output, timeout)));
}
void Communicator::gather(Buffer input, Buffer output, int root, Duration timeout) {
  run(false, to_run(*backend_, check_calls_, gather_call(*backend_, input, output, root, timeout)));
}
void Communicator::scatter(Buffer input, Buffer output, int root, Duration timeout) {
  run(false,
      to_run(*backend_, check_calls_, scatter_call(*backend_, input, output, root, timeout)));
}
void Communicator::reduce_scatter(Buffer input, Buffer output, ReduceOp op, Duration timeout) {
  run(false,
      to_run(*backend_, check_calls_, reduce_scatter_call(*backend_, input, output, op, timeout)));
}
void Communicator::all_to_all(Buffer input, Buffer output, Duration timeout) {
  run(false, to_run(*backend_, check_calls_, all_to_all_call(*backend_, input, output, timeout)));
}
void Communicator::barrier(Duration timeout) {
  run(false, to_run(*backend_, check_calls_, barrier_call(*backend_, timeout)));
}
void Communicator::send(Buffer data, int peer, int tag, Duration timeout) {
  run(false, to_run(*backend_, check_calls_, send_call(*backend_, data, peer, tag, timeout)));
}
void Communicator::recv(Buffer data, int peer, int tag, Duration timeout) {
  run(false, to_run(*backend_, check_calls_, recv_call(*backend_, data, peer, tag, timeout)));
}

Work Communicator::all_reduce_async(Buffer data, ReduceOp op, Duration timeout) {
  return run(true, to_run(*backend_, check_calls_, all_reduce_call(*backend_, data, op, timeout)));
}
Work Communicator::broadcast_async(Buffer data, int root, Duration timeout) {
  return run(true, to_run(*backend_, check_calls_, broadcast_call(*backend_, data, root, timeout)));
}
Work Communicator::reduce_async(Buffer data, ReduceOp op, int root, Duration timeout) {
  return run(true,
             to_run(*backend_, check_calls_, reduce_call(*backend_, data, op, root, timeout)));
}
Work Communicator::all_gather_async(Buffer input, Buffer output, Duration timeout) {
  return run(true,
             to_run(*backend_, check_calls_, all_gather_call(*backend_, input, output, timeout)));
}
Work Communicator::gather_async(Buffer input, Buffer output, int root, Duration timeout) {
  return run(true,
             to_run(*backend_, check_calls_, gather_call(*backend_, input, output, root, timeout)));
}
Work Communicator::scatter_async(Buffer input, Buffer output, int root, Duration timeout) {
  return run(
      true, to_run(*backend_, check_calls_, scatter_call(*backend_, input, output, root, timeout)));
}
Work Communicator::reduce_scatter_async(Buffer input, Buffer output, ReduceOp op,
                                        Duration timeout) {
  return run(true, to_run(*backend_, check_calls_,
                          reduce_scatter_call(*backend_, input, output, op, timeout)));
}
Work Communicator::all_to_all_async(Buffer input, Buffer output, Duration timeout) {
  return run(true,
             to_run(*backend_, check_calls_, all_to_all_call(*backend_, input, output, timeout)));
}
Work Communicator::barrier_async(Duration timeout) {
  return run(true, to_run(*backend_, check_calls_, barrier_call(*backend_, timeout)));
}
Work Communicator::send_async(Buffer data, int peer, int tag, Duration timeout) {
  return run(true, to_run(*backend_, check_calls_, send_call(*backend_, data, peer, tag, timeout)));
}
Work Communicator::recv_async(Buffer data, int peer, int tag, Duration timeout) {
  return run(true, to_run(*backend_, check_calls_, recv_call(*backend_, data, peer, tag, timeout)));
}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  queue_->drain();
  if (check_calls_) {
    Print print;
    print.kind = Kind::split;
    detail::check_call(*backend_, print, backend_->default_timeout());
  }
  std::unique_ptr<detail::Backend> part = backend_->split(color, key);
  if (!part) return nullptr;
  auto made = std::make_unique<Communicator>(std::move(part));
  made->check_calls_ = check_calls_;
  return made;
}

}  // namespace cohort
