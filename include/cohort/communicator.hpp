// Collectives: the Communicator and the types it works on.
//
// A Communicator connects the ranks of a World (or of a subgroup made by
// split()) and runs collectives on contiguous buffers of eight element types
// with five reduction ops, blocking or queued (`*_async`, returning a Work).
// Every call has a timeout; a peer that fails or vanishes turns into
// cohort::PeerLost in every surviving rank. Backends (`self` for a world of
// one, `gloo` over TCP) register by priority; COHORT_BACKEND or an option
// picks one by name.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <cohort/errors.hpp>

namespace cohort {

/// Element types of collective buffers.
enum class DataType { f32, f64, f16, bf16, i8, u8, i32, i64 };

/// Reductions. `avg` is `sum` divided by the number of ranks (integer types
/// divide with truncation toward zero).
enum class ReduceOp { sum, prod, min, max, avg };

std::string_view to_string(DataType type) noexcept;
std::string_view to_string(ReduceOp op) noexcept;
/// Bytes per element.
std::size_t size_of(DataType type) noexcept;

/// IEEE 754 half precision (binary16) and bfloat16, stored as their bits.
/// Conversions round to nearest even; NaN stays NaN.
struct Half {
  std::uint16_t bits = 0;
  static Half from_float(float value) noexcept;
  float to_float() const noexcept;
};
struct BFloat16 {
  std::uint16_t bits = 0;
  static BFloat16 from_float(float value) noexcept;
  float to_float() const noexcept;
};

/// The DataType of a C++ element type (float, double, Half, BFloat16,
/// std::int8_t, std::uint8_t, std::int32_t, std::int64_t).
template <class T>
constexpr DataType data_type_of() noexcept {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>)
    return DataType::f32;
  else if constexpr (std::is_same_v<U, double>)
    return DataType::f64;
  else if constexpr (std::is_same_v<U, Half>)
    return DataType::f16;
  else if constexpr (std::is_same_v<U, BFloat16>)
    return DataType::bf16;
  else if constexpr (std::is_same_v<U, std::int8_t>)
    return DataType::i8;
  else if constexpr (std::is_same_v<U, std::uint8_t>)
    return DataType::u8;
  else if constexpr (std::is_same_v<U, std::int32_t>)
    return DataType::i32;
  else if constexpr (std::is_same_v<U, std::int64_t>)
    return DataType::i64;
  else
    static_assert(sizeof(T) == 0, "not a cohort collective element type");
}

/// Untyped view of a contiguous buffer: what backends receive.
struct Buffer {
  void* data = nullptr;
  std::size_t count = 0;  ///< elements, not bytes
  DataType type = DataType::f32;

  template <class T, std::size_t N>
  static Buffer of(std::span<T, N> span) noexcept {
    return {const_cast<std::remove_cv_t<T>*>(span.data()), span.size(), data_type_of<T>()};
  }
  std::size_t bytes() const noexcept { return count * size_of(type); }
};

/// Raised in a surviving rank when a peer failed or vanished during a call.
/// The message names the peer's rank and host where they are known;
/// peer_rank() is -1 where they are not. A communicator that raised it is
/// broken: every later call raises it again.
class PeerLost : public Error {
 public:
  PeerLost(const std::string& message, int peer_rank) : Error(message), peer_rank_(peer_rank) {}
  int peer_rank() const noexcept { return peer_rank_; }

 private:
  int peer_rank_;
};

namespace detail {
class Backend;
class AsyncQueue;
struct WorkState;
}  // namespace detail

/// A collective started by an `*_async` call. Its buffers must stay alive and
/// untouched until wait() returns. Destroying a Work does not cancel or wait
/// for the operation (the communicator finishes it).
class Work {
 public:
  /// A Work that is already complete.
  Work() = default;
  /// Blocks until the operation ends (it is bounded by its own timeout) and
  /// rethrows its error, every time it is called: PeerLost, Timeout, ...
  void wait();
  /// True once the operation has ended, successfully or not.
  bool completed() const noexcept;

 private:
  friend class detail::AsyncQueue;
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::WorkState> state_;
};

/// The collectives, on one group of ranks. Every rank of the group calls the
/// same collectives in the same order, from one thread at a time. Buffer
/// sizes are in elements:
///   all_gather, gather (at root): output = size() × input
///   scatter (input at root), reduce_scatter, all_to_all: input = size() × output
/// Aliasing: in-place use passes the same buffer as input and output where
/// the sizes agree (all_to_all), or this rank's slice of the larger buffer
/// (all_gather and gather: input = output + rank × count; scatter and
/// reduce_scatter: output = input + rank × count); any other overlap of input
/// and output is rejected with InvalidArgument. An all_to_all is in place on
/// every rank or on none.
///
/// Timeouts: every call takes one; kDefaultTimeout means default_timeout()
/// (COHORT_TIMEOUT or InitOptions::timeout). A call that runs out raises
/// Timeout or, when a peer is known to be gone, PeerLost.
///
/// `*_async` variants check their arguments at once, queue the operation and
/// return a Work; queued operations run in call order on one thread per
/// communicator, and a blocking call first waits for the queued ones.
class Communicator {
 public:
  using Duration = std::chrono::milliseconds;
  static constexpr Duration kDefaultTimeout{-1};

  /// For backends: wraps one (see src/comm/backend.hpp).
  explicit Communicator(std::unique_ptr<detail::Backend> backend);
  /// Finishes queued async operations, then disconnects.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const noexcept;
  int size() const noexcept;
  /// "self", "gloo", ...
  std::string_view backend() const noexcept;
  /// The bound on every call that is given kDefaultTimeout.
  Duration default_timeout() const noexcept;

  void all_reduce(Buffer data, ReduceOp op, Duration timeout = kDefaultTimeout);
  void broadcast(Buffer data, int root, Duration timeout = kDefaultTimeout);
  /// The result lands in `data` at `root`; other ranks' `data` is unchanged.
  void reduce(Buffer data, ReduceOp op, int root, Duration timeout = kDefaultTimeout);
  void all_gather(Buffer input, Buffer output, Duration timeout = kDefaultTimeout);
  /// `output` is used at `root` only.
  void gather(Buffer input, Buffer output, int root, Duration timeout = kDefaultTimeout);
  /// `input` is used at `root` only.
  void scatter(Buffer input, Buffer output, int root, Duration timeout = kDefaultTimeout);
  void reduce_scatter(Buffer input, Buffer output, ReduceOp op, Duration timeout = kDefaultTimeout);
  void all_to_all(Buffer input, Buffer output, Duration timeout = kDefaultTimeout);
  void barrier(Duration timeout = kDefaultTimeout);
  /// Returns once `peer` has the message, which may mean waiting for its
  /// matching recv (order sends and receives so that no ring of ranks waits in
  /// a circle). A message to oneself is buffered until received.
  void send(Buffer data, int peer, int tag, Duration timeout = kDefaultTimeout);
  /// `data` must be the size of the message sent: one that is not raises
  /// InvalidArgument (the message is taken, `data`'s contents are then
  /// unspecified, and the communicator goes on).
  void recv(Buffer data, int peer, int tag, Duration timeout = kDefaultTimeout);

  Work all_reduce_async(Buffer data, ReduceOp op, Duration timeout = kDefaultTimeout);
  Work broadcast_async(Buffer data, int root, Duration timeout = kDefaultTimeout);
  Work reduce_async(Buffer data, ReduceOp op, int root, Duration timeout = kDefaultTimeout);
  Work all_gather_async(Buffer input, Buffer output, Duration timeout = kDefaultTimeout);
  Work gather_async(Buffer input, Buffer output, int root, Duration timeout = kDefaultTimeout);
  Work scatter_async(Buffer input, Buffer output, int root, Duration timeout = kDefaultTimeout);
  Work reduce_scatter_async(Buffer input, Buffer output, ReduceOp op,
                            Duration timeout = kDefaultTimeout);
  Work all_to_all_async(Buffer input, Buffer output, Duration timeout = kDefaultTimeout);
  Work barrier_async(Duration timeout = kDefaultTimeout);
  Work send_async(Buffer data, int peer, int tag, Duration timeout = kDefaultTimeout);
  Work recv_async(Buffer data, int peer, int tag, Duration timeout = kDefaultTimeout);

  /// Checked calls: before each collective (and split, allocate), every
  /// rank tells the others what it is calling (one small all_gather), and a
  /// call that differs from another rank's (collective, count, type, op or
  /// root) raises InvalidArgument on every rank, naming both, before any
  /// rank makes it; the communicator goes on. For finding a mismatch that
  /// would hang, or give wrong results; it costs an all_gather a call.
  /// Off unless COHORT_CHECK_CALLS=1; every rank must turn it on or off at
  /// the same point. Subgroups from split() inherit it.
  void check_calls(bool on) noexcept;

  /// A communicator over the ranks that pass the same `color`, ordered by
  /// `key` (ties by rank). Collective over this communicator. A negative
  /// color joins no group: the result is nullptr.
  std::unique_ptr<Communicator> split(int color, int key);

  /// `bytes` of zero-filled, 64-byte aligned memory for this rank's buffers,
  /// where this communicator's collectives work on them fastest. Collective:
  /// every rank asks for the same size, in the same order among its other
  /// calls. Under shm every rank maps every rank's allocation, so an
  /// all_reduce whose buffer lies, on every rank, in memory from the same
  /// allocate call (at any offset: DDP's gradient buckets) reduces the
  /// peers' buffers in place, without copying through the segment; other
  /// backends return ordinary memory. It stays valid while the pointer (or a
  /// copy of it) lives, also after the communicator is gone.
  std::shared_ptr<void> allocate(std::size_t bytes, Duration timeout = kDefaultTimeout);

  // Typed conveniences.
  template <class T, std::size_t N>
  void all_reduce(std::span<T, N> data, ReduceOp op, Duration timeout = kDefaultTimeout) {
    all_reduce(Buffer::of(data), op, timeout);
  }
  template <class T, std::size_t N>
  Work all_reduce_async(std::span<T, N> data, ReduceOp op, Duration timeout = kDefaultTimeout) {
    return all_reduce_async(Buffer::of(data), op, timeout);
  }
  template <class T, std::size_t N>
  void broadcast(std::span<T, N> data, int root, Duration timeout = kDefaultTimeout) {
    broadcast(Buffer::of(data), root, timeout);
  }
  template <class T, std::size_t N, std::size_t M>
  void all_gather(std::span<const T, N> input, std::span<T, M> output,
                  Duration timeout = kDefaultTimeout) {
    all_gather(Buffer::of(input), Buffer::of(output), timeout);
  }
  template <class T, std::size_t N>
  void send(std::span<T, N> data, int peer, int tag = 0, Duration timeout = kDefaultTimeout) {
    send(Buffer::of(data), peer, tag, timeout);
  }
  template <class T, std::size_t N>
  void recv(std::span<T, N> data, int peer, int tag = 0, Duration timeout = kDefaultTimeout) {
    recv(Buffer::of(data), peer, tag, timeout);
  }

 private:
  // Runs `operation` now, after the queued ones, or queues it. An empty
  // operation (nothing to move) completes at once.
  Work run(bool queued, std::function<void()> operation);

  std::unique_ptr<detail::Backend> backend_;
  bool check_calls_ = false;
  std::unique_ptr<detail::AsyncQueue> queue_;  // declared last: stops first
};

/// The backends compiled into this build, highest priority first ("self", ...).
std::vector<std::string> compiled_backends();

}  // namespace cohort
