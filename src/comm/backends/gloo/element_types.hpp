// What Gloo sees of each cohort element type: a C++ type of the same size
// (f16 and bf16 as their 16 bits), so that Gloo splits buffers between
// elements; cohort's own reductions give them their meaning.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cohort/communicator.hpp>

namespace cohort::detail::gloo_backend {

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

template <DataType D>
using StorageOf = typename Storage<D>::Type;

/// Calls `body(std::integral_constant<DataType, D>{})` for the runtime `type`.
template <class Body>
decltype(auto) with_type(DataType type, Body&& body) {
  switch (type) {
    case DataType::f64:
      return body(std::integral_constant<DataType, DataType::f64>{});
    case DataType::f16:
      return body(std::integral_constant<DataType, DataType::f16>{});
    case DataType::bf16:
      return body(std::integral_constant<DataType, DataType::bf16>{});
    case DataType::i8:
      return body(std::integral_constant<DataType, DataType::i8>{});
    case DataType::u8:
      return body(std::integral_constant<DataType, DataType::u8>{});
    case DataType::i32:
      return body(std::integral_constant<DataType, DataType::i32>{});
    case DataType::i64:
      return body(std::integral_constant<DataType, DataType::i64>{});
    case DataType::f32:
      break;
  }
  return body(std::integral_constant<DataType, DataType::f32>{});
}

/// Calls `body` with a null pointer of the type Gloo sees for `type`.
template <class Body>
void with_element(DataType type, Body&& body) {
  with_type(type, [&](auto tag) { body(static_cast<StorageOf<decltype(tag)::value>*>(nullptr)); });
}

}  // namespace cohort::detail::gloo_backend
