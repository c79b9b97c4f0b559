// Collectives: the Communicator and the types it works on.
//
// A Communicator connects the ranks of a World (or of a subgroup made by
// split()) and runs collectives on contiguous buffers of eight element types
// with five reduction ops. Every blocking call takes a timeout; a peer that
// fails or vanishes turns into cohort::PeerLost in every surviving rank.
// Backends (`self` for a world of one; `gloo` next) register by priority;
// COHORT_BACKEND or an option picks one by name.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
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
/// The message names the peer's rank and host.
class PeerLost : public Error {
 public:
  PeerLost(const std::string& message, int peer_rank) : Error(message), peer_rank_(peer_rank) {}
  int peer_rank() const noexcept { return peer_rank_; }

 private:
  int peer_rank_;
};

/// The collectives, on one group of ranks. A Communicator is used by one
/// thread at a time; every rank of the group must call the same collectives
/// in the same order. Buffer sizes are in elements:
///   all_gather, gather (at root): output = size() × input
///   scatter (input at root), reduce_scatter, all_to_all: input = size() × output
/// In-place use passes the same buffer as input and output where sizes agree
/// (all_to_all included); other overlaps are rejected with InvalidArgument.
class Communicator {
 public:
  using Duration = std::chrono::milliseconds;

  virtual ~Communicator() = default;

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  /// "self", "gloo", ...
  virtual std::string_view backend() const noexcept = 0;
  /// Bound on every call that is given none.
  virtual Duration default_timeout() const noexcept = 0;

  virtual void all_reduce(Buffer data, ReduceOp op, Duration timeout) = 0;
  virtual void broadcast(Buffer data, int root, Duration timeout) = 0;
  /// The result lands in `data` at `root`; other ranks' `data` is unchanged.
  virtual void reduce(Buffer data, ReduceOp op, int root, Duration timeout) = 0;
  virtual void all_gather(Buffer input, Buffer output, Duration timeout) = 0;
  /// `output` is used at `root` only.
  virtual void gather(Buffer input, Buffer output, int root, Duration timeout) = 0;
  /// `input` is used at `root` only.
  virtual void scatter(Buffer input, Buffer output, int root, Duration timeout) = 0;
  virtual void reduce_scatter(Buffer input, Buffer output, ReduceOp op, Duration timeout) = 0;
  virtual void all_to_all(Buffer input, Buffer output, Duration timeout) = 0;
  virtual void barrier(Duration timeout) = 0;
  /// Returns once `peer` has the message, which may mean waiting for its
  /// matching recv (order sends and receives so that no ring of ranks waits in
  /// a circle). A message to oneself is buffered until received.
  virtual void send(Buffer data, int peer, int tag, Duration timeout) = 0;
  virtual void recv(Buffer data, int peer, int tag, Duration timeout) = 0;

  /// A communicator over the ranks that pass the same `color`, ordered by
  /// `key` (ties by rank). Collective over this communicator. A negative
  /// color joins no group: the result is nullptr.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Typed conveniences with the default timeout.
  template <class T, std::size_t N>
  void all_reduce(std::span<T, N> data, ReduceOp op) {
    all_reduce(Buffer::of(data), op, default_timeout());
  }
  template <class T, std::size_t N>
  void broadcast(std::span<T, N> data, int root) {
    broadcast(Buffer::of(data), root, default_timeout());
  }
  void barrier() { barrier(default_timeout()); }
};

/// The backends compiled into this build, highest priority first ("self", ...).
std::vector<std::string> compiled_backends();

/// Checks a buffer's size in a message that names the collective and both
/// counts; throws InvalidArgument. For backends.
void require_count(std::string_view collective, std::string_view what, const Buffer& buffer,
                   std::size_t expected);
/// Checks that two buffers hold the same element type; throws InvalidArgument.
void require_same_type(std::string_view collective, const Buffer& a, const Buffer& b);
/// Checks 0 <= rank < size; throws InvalidArgument naming `role` ("root", "peer").
void require_rank(std::string_view collective, std::string_view role, int rank, int size);

}  // namespace cohort
