// DataType and ReduceOp names, sizes, half-precision conversions, and the
// argument checks every backend shares.
#include <cmath>
#include <cstring>

#include <cohort/communicator.hpp>

#include "core/strings.hpp"

namespace cohort {

using detail::cat;

std::string_view to_string(DataType type) noexcept {
  switch (type) {
    case DataType::f32:
      return "f32";
    case DataType::f64:
      return "f64";
    case DataType::f16:
      return "f16";
    case DataType::bf16:
      return "bf16";
    case DataType::i8:
      return "i8";
    case DataType::u8:
      return "u8";
    case DataType::i32:
      return "i32";
    case DataType::i64:
      return "i64";
  }
  return "?";
}

std::string_view to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::prod:
      return "prod";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
    case ReduceOp::avg:
      return "avg";
  }
  return "?";
}

std::size_t size_of(DataType type) noexcept {
  switch (type) {
    case DataType::f64:
    case DataType::i64:
      return 8;
    case DataType::f32:
    case DataType::i32:
      return 4;
    case DataType::f16:
    case DataType::bf16:
      return 2;
    case DataType::i8:
    case DataType::u8:
      return 1;
  }
  return 1;
}

namespace {

std::uint32_t bits_of(float value) noexcept {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float float_of(std::uint32_t bits) noexcept {
  float value = 0;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

}  // namespace

Half Half::from_float(float value) noexcept {
  const std::uint32_t bits = bits_of(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf or NaN (keep NaN a NaN)
    return {static_cast<std::uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u))};
  }
  if (magnitude >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // overflow
  if (magnitude < 0x38800000u) {
    // Subnormal half (or zero): scale into the subnormal range and round.
    const float scaled = std::fabs(value) * 16777216.0f;  // 2^24 units of the smallest subnormal
    return {static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(scaled)))};
  }
  // Normal: rebias the exponent, round the mantissa to 10 bits, nearest even.
  const std::uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  return {static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13))};
}

float Half::to_float() const noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal
    const float value = static_cast<float>(mantissa) / 16777216.0f;
    return sign ? -value : value;
  }
  if (exponent == 31) return float_of(sign | 0x7f800000u | (mantissa << 13));
  return float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

BFloat16 BFloat16::from_float(float value) noexcept {
  const std::uint32_t bits = bits_of(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return {static_cast<std::uint16_t>((bits >> 16) | 0x40u)};  // quiet NaN
  }
  const std::uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return {static_cast<std::uint16_t>(rounded >> 16)};
}

float BFloat16::to_float() const noexcept {
  return float_of(static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace cohort
