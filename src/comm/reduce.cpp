#include "comm/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cohort::detail {
namespace {

template <class T>
T combine(ReduceOp op, T a, T b) noexcept {
  if constexpr (std::is_integral_v<T>) {
    // Through the unsigned type: wrap-around is defined there.
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case ReduceOp::prod:
        return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case ReduceOp::min:
        return std::min(a, b);
      case ReduceOp::max:
        return std::max(a, b);
    }
  } else {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        return a + b;
      case ReduceOp::prod:
        return a * b;
      case ReduceOp::min:
        return b < a ? b : a;
      case ReduceOp::max:
        return a < b ? b : a;
    }
  }
  return a;
}

template <class T>
void reduce_typed(ReduceOp op, void* accumulate, const void* input, std::size_t count) noexcept {
  T* out = static_cast<T*>(accumulate);
  const T* in = static_cast<const T*>(input);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = combine(op, out[i], in[i]);
}

template <class Packed>
void reduce_packed(ReduceOp op, void* accumulate, const void* input, std::size_t count) noexcept {
  Packed* out = static_cast<Packed*>(accumulate);
  const Packed* in = static_cast<const Packed*>(input);
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = Packed::from_float(combine(op, out[i].to_float(), in[i].to_float()));
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
  switch (type) {
    case DataType::f32:
      return reduce_typed<float>(op, accumulate, input, count);
    case DataType::f64:
      return reduce_typed<double>(op, accumulate, input, count);
    case DataType::f16:
      return reduce_packed<Half>(op, accumulate, input, count);
    case DataType::bf16:
      return reduce_packed<BFloat16>(op, accumulate, input, count);
    case DataType::i8:
      return reduce_typed<std::int8_t>(op, accumulate, input, count);
    case DataType::u8:
      return reduce_typed<std::uint8_t>(op, accumulate, input, count);
    case DataType::i32:
      return reduce_typed<std::int32_t>(op, accumulate, input, count);
    case DataType::i64:
      return reduce_typed<std::int64_t>(op, accumulate, input, count);
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
