#include "comm/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cohort::detail {
namespace {

template <class T, ReduceOp Op>
T combine(T a, T b) noexcept {
  if constexpr (std::is_integral_v<T> && (Op == ReduceOp::sum || Op == ReduceOp::avg)) {
    using U = std::make_unsigned_t<T>;  // wrap-around is defined there
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else if constexpr (std::is_integral_v<T> && Op == ReduceOp::prod) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else if constexpr (Op == ReduceOp::sum || Op == ReduceOp::avg) {
    return a + b;
  } else if constexpr (Op == ReduceOp::prod) {
    return a * b;
  } else if constexpr (Op == ReduceOp::min) {
    return b < a ? b : a;
  } else {
    return a < b ? b : a;
  }
}

// Half and BFloat16 are computed in float and rounded back.
template <class T>
constexpr bool kPacked = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// One pass, the op fixed at compile time so that the loop vectorizes
// (this file is built with -O3). `out` may be `a` or `b`.
template <class T, ReduceOp Op>
void combine_all(T* out, const T* a, const T* b, std::size_t count) noexcept {
  for (std::size_t i = 0; i < count; ++i) {
    if constexpr (kPacked<T>) {
      out[i] = T::from_float(combine<float, Op>(a[i].to_float(), b[i].to_float()));
    } else {
      out[i] = combine<T, Op>(a[i], b[i]);
    }
  }
}

template <class T>
void reduce_typed(ReduceOp op, void* out, const void* a, const void* b,
                  std::size_t count) noexcept {
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return combine_all<T, ReduceOp::sum>(o, x, y, count);
    case ReduceOp::prod:
      return combine_all<T, ReduceOp::prod>(o, x, y, count);
    case ReduceOp::min:
      return combine_all<T, ReduceOp::min>(o, x, y, count);
    case ReduceOp::max:
      return combine_all<T, ReduceOp::max>(o, x, y, count);
  }
}

template <class T>
void divide_typed(void* data, std::size_t count, int ranks) noexcept {
  T* values = static_cast<T*>(data);
  for (std::size_t i = 0; i < count; ++i)
    values[i] = static_cast<T>(values[i] / static_cast<T>(ranks));
}

template <class Packed>
void divide_packed(void* data, std::size_t count, int ranks) noexcept {
  Packed* values = static_cast<Packed*>(data);
  for (std::size_t i = 0; i < count; ++i) {
    values[i] = Packed::from_float(values[i].to_float() / static_cast<float>(ranks));
  }
}

}  // namespace

void reduce_into(DataType type, ReduceOp op, void* accumulate, const void* input,
                 std::size_t count) noexcept {
  reduce_to(type, op, accumulate, accumulate, input, count);
}

void reduce_to(DataType type, ReduceOp op, void* out, const void* a, const void* b,
               std::size_t count) noexcept {
  switch (type) {
    case DataType::f32:
      return reduce_typed<float>(op, out, a, b, count);
    case DataType::f64:
      return reduce_typed<double>(op, out, a, b, count);
    case DataType::f16:
      return reduce_typed<Half>(op, out, a, b, count);
    case DataType::bf16:
      return reduce_typed<BFloat16>(op, out, a, b, count);
    case DataType::i8:
      return reduce_typed<std::int8_t>(op, out, a, b, count);
    case DataType::u8:
      return reduce_typed<std::uint8_t>(op, out, a, b, count);
    case DataType::i32:
      return reduce_typed<std::int32_t>(op, out, a, b, count);
    case DataType::i64:
      return reduce_typed<std::int64_t>(op, out, a, b, count);
  }
}

void finish_average(DataType type, void* data, std::size_t count, int ranks) noexcept {
  switch (type) {
    case DataType::f32:
      return divide_typed<float>(data, count, ranks);
    case DataType::f64:
      return divide_typed<double>(data, count, ranks);
    case DataType::f16:
      return divide_packed<Half>(data, count, ranks);
    case DataType::bf16:
      return divide_packed<BFloat16>(data, count, ranks);
    case DataType::i8:
      return divide_typed<std::int8_t>(data, count, ranks);
    case DataType::u8:
      return divide_typed<std::uint8_t>(data, count, ranks);
    case DataType::i32:
      return divide_typed<std::int32_t>(data, count, ranks);
    case DataType::i64:
      return divide_typed<std::int64_t>(data, count, ranks);
  }
}

}  // namespace cohort::detail
