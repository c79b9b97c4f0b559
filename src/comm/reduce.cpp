#include "comm/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "comm/copy.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

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

// Calls `body(static_cast<T*>(nullptr))` with T the C++ type of `type`.
template <class Body>
void with_element_type(DataType type, Body&& body) noexcept {
  switch (type) {
    case DataType::f32:
      return body(static_cast<float*>(nullptr));
    case DataType::f64:
      return body(static_cast<double*>(nullptr));
    case DataType::f16:
      return body(static_cast<Half*>(nullptr));
    case DataType::bf16:
      return body(static_cast<BFloat16*>(nullptr));
    case DataType::i8:
      return body(static_cast<std::int8_t*>(nullptr));
    case DataType::u8:
      return body(static_cast<std::uint8_t*>(nullptr));
    case DataType::i32:
      return body(static_cast<std::int32_t*>(nullptr));
    case DataType::i64:
      return body(static_cast<std::int64_t*>(nullptr));
  }
}

// reduce_many works on blocks of kBlock elements that stay in L1 where it
// needs a temporary: f16/bf16 in float, and more than kFoldMost inputs.
constexpr std::size_t kBlock = 512;

#if defined(__x86_64__)
// CPUID's AVX and F16C bits, and the OS saving the AVX registers (XGETBV).
bool has_f16c() noexcept {
  static const bool kHas = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    if ((ecx & bit_AVX) == 0 || (ecx & bit_F16C) == 0 || (ecx & bit_OSXSAVE) == 0) return false;
    unsigned low = 0, high = 0;
    __asm__("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    return (low & 6u) == 6u;  // XMM and YMM state
  }();
  return kHas;
}

bool has_avx2() noexcept {
  static const bool kHas = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
    return (ebx & bit_AVX2) != 0 && has_f16c();  // has_f16c: the OS saves YMM state
  }();
  return kHas;
}
#endif

float float_of_bf16(BFloat16 value) noexcept {
  const std::uint32_t bits = static_cast<std::uint32_t>(value.bits) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

// BFloat16::from_float without branches: round to nearest even, NaN stays NaN.
BFloat16 bf16_of_float(float value) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (bits >> 16) | 0x40u;
  return {static_cast<std::uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded)};
}

// f16/bf16 to float and back, without F16C (fold_half_f16c has it).
template <class T>
void load_block(const T* in, float* out, std::size_t count) noexcept {
  for (std::size_t i = 0; i < count; ++i) {
    if constexpr (std::is_same_v<T, Half>) {
      out[i] = in[i].to_float();
    } else {
      out[i] = float_of_bf16(in[i]);
    }
  }
}

template <class T>
void store_block(const float* in, T* out, std::size_t count) noexcept {
  for (std::size_t i = 0; i < count; ++i) {
    if constexpr (std::is_same_v<T, Half>) {
      out[i] = Half::from_float(in[i]);
    } else {
      out[i] = bf16_of_float(in[i]);
    }
  }
}

// f16/bf16: blocks of kBlock elements accumulate in float in an array that
// stays in L1, one input at a time, so that the conversions vectorize.
template <class T, ReduceOp Op>
void reduce_many_packed(T* out, const T* const* inputs, int n, std::size_t count) noexcept {
  alignas(64) float accumulated[kBlock];
  alignas(64) float next[kBlock];
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t m = std::min(kBlock, count - base);
    load_block(inputs[0] + base, accumulated, m);
    for (int r = 1; r < n; ++r) {
      load_block(inputs[r] + base, next, m);
      for (std::size_t i = 0; i < m; ++i)
        accumulated[i] = combine<float, Op>(accumulated[i], next[i]);
    }
    if constexpr (Op == ReduceOp::avg) {
      for (std::size_t i = 0; i < m; ++i)
        accumulated[i] /= static_cast<float>(n);
    }
    store_block(accumulated, out + base, m);
  }
}

// Inputs that one pass folds (fold, fold_bf16); more take blocks.
constexpr int kFoldMost = 8;

template <class Body, int... N>
void with_count_in(int n, Body&& body, std::integer_sequence<int, N...>) noexcept {
  ((n == N + 1 ? body(std::integral_constant<int, N + 1>{}) : void()), ...);
}

// Calls body(std::integral_constant<int, n>{}), for n from 1 to kFoldMost.
template <class Body>
void with_count(int n, Body&& body) noexcept {
  with_count_in(n, body, std::make_integer_sequence<int, kFoldMost>{});
}

// f16/bf16 elements [first, count) one at a time, as the 8-wide folds
// below do them (their tails).
template <ReduceOp Op, class T>
void fold_packed_from(T* out, const T* const* inputs, int n, std::size_t first,
                      std::size_t count) noexcept {
  for (std::size_t i = first; i < count; ++i) {
    float value = inputs[0][i].to_float();
    for (int r = 1; r < n; ++r)
      value = combine<float, Op>(value, inputs[r][i].to_float());
    if constexpr (Op == ReduceOp::avg) value /= static_cast<float>(n);
    out[i] = T::from_float(value);
  }
}

#if defined(__x86_64__)
// f16 with F16C, any number of inputs: 8 elements at a time, accumulated in
// a register in float, left to right, rounded once (the block's bits).
__attribute__((target("avx,f16c"))) inline __m256 floats_of_halves(const Half* in) noexcept {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
}

template <ReduceOp Op>
__attribute__((target("avx,f16c"))) inline __m256 combine_8(__m256 a, __m256 b) noexcept {
  if constexpr (Op == ReduceOp::sum || Op == ReduceOp::avg) {
    return _mm256_add_ps(a, b);
  } else if constexpr (Op == ReduceOp::prod) {
    return _mm256_mul_ps(a, b);
  } else if constexpr (Op == ReduceOp::min) {
    return _mm256_min_ps(b, a);  // b < a ? b : a, as combine
  } else {
    return _mm256_max_ps(b, a);  // a < b ? b : a
  }
}

template <ReduceOp Op>
__attribute__((target("avx,f16c"))) void fold_half_f16c(Half* out, const Half* const* inputs, int n,
                                                        std::size_t count) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256 value = floats_of_halves(inputs[0] + i);
    for (int r = 1; r < n; ++r)
      value = combine_8<Op>(value, floats_of_halves(inputs[r] + i));
    if constexpr (Op == ReduceOp::avg)
      value = _mm256_div_ps(value, _mm256_set1_ps(static_cast<float>(n)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT));
  }
  fold_packed_from<Op>(out, inputs, n, i, count);
}

// bf16 with AVX2, any number of inputs, as fold_half_f16c: widened to float
// in registers, rounded once to nearest even (a NaN stays a NaN), as
// bf16_of_float.
__attribute__((target("avx2,f16c"))) inline __m256 floats_of_bf16s(const BFloat16* in) noexcept {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

__attribute__((target("avx2,f16c"))) inline __m128i bf16s_of_floats(__m256 values) noexcept {
  const __m256i bits = _mm256_castps_si256(values);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd), 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  // Below 2^31 once the sign is off, so the signed comparison serves.
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i halves = _mm256_blendv_epi8(rounded, quiet_nan, nan);  // each below 2^16
  // Pack the eight 32-bit values to 16 bits: within each 128-bit lane, then
  // the lanes' low halves together.
  const __m256i packed = _mm256_packus_epi32(halves, halves);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

template <ReduceOp Op>
__attribute__((target("avx2,f16c"))) void fold_bf16_avx2(BFloat16* out,
                                                         const BFloat16* const* inputs, int n,
                                                         std::size_t count) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256 value = floats_of_bf16s(inputs[0] + i);
    for (int r = 1; r < n; ++r)
      value = combine_8<Op>(value, floats_of_bf16s(inputs[r] + i));
    if constexpr (Op == ReduceOp::avg)
      value = _mm256_div_ps(value, _mm256_set1_ps(static_cast<float>(n)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), bf16s_of_floats(value));
  }
  fold_packed_from<Op>(out, inputs, n, i, count);
}
#endif

// bf16, N inputs: one pass, converted in registers.
template <ReduceOp Op, int N>
void fold_bf16(BFloat16* out, const BFloat16* const* inputs, std::size_t count) noexcept {
  const BFloat16* in[N];
  std::copy_n(inputs, N, in);
  for (std::size_t i = 0; i < count; ++i) {
    float value = float_of_bf16(in[0][i]);
    for (int r = 1; r < N; ++r)
      value = combine<float, Op>(value, float_of_bf16(in[r][i]));
    if constexpr (Op == ReduceOp::avg) value /= static_cast<float>(N);
    out[i] = bf16_of_float(value);
  }
}

// The other types: out[i] = inputs[0][i] op ... op inputs[N-1][i], left to
// right, in one pass; N fixed, so the loop over the inputs unrolls and the
// one over the elements vectorizes (three times faster than a block
// accumulated one input at a time, at n = 4 in cache). `divisor`: avg's n,
// 0 for none.
template <class T, ReduceOp Op, int N>
void fold(T* out, const T* const* inputs, std::size_t count, int divisor) noexcept {
  const T* in[N];
  std::copy_n(inputs, N, in);
  if (divisor == 0) {
    for (std::size_t i = 0; i < count; ++i) {
      T value = in[0][i];
      for (int r = 1; r < N; ++r)
        value = combine<T, Op>(value, in[r][i]);
      out[i] = value;
    }
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      T value = in[0][i];
      for (int r = 1; r < N; ++r)
        value = combine<T, Op>(value, in[r][i]);
      out[i] = static_cast<T>(value / static_cast<T>(divisor));
    }
  }
}

// fold for 1 to kFoldMost inputs.
template <class T, ReduceOp Op>
void fold_any(T* out, const T* const* inputs, int n, std::size_t count, int divisor) noexcept {
  with_count(n, [&](auto inputs_count) {
    fold<T, Op, decltype(inputs_count)::value>(out, inputs, count, divisor);
  });
}

template <class T, ReduceOp Op>
void reduce_many_typed(T* out, const T* const* inputs, int n, std::size_t count) noexcept {
  const int divisor = Op == ReduceOp::avg ? n : 0;
  if (n <= kFoldMost) return fold_any<T, Op>(out, inputs, n, count, divisor);
  // More inputs: a block at a time in L1, kFoldMost inputs and then the
  // block and kFoldMost - 1 more per pass, so that `out` may be an input.
  alignas(64) T block[kBlock];
  const T* group[kFoldMost];
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t m = std::min(kBlock, count - base);
    for (int r = 0; r < kFoldMost; ++r)
      group[r] = inputs[r] + base;
    fold<T, Op, kFoldMost>(block, group, m, 0);
    for (int first = kFoldMost; first < n; first += kFoldMost - 1) {
      const int more = std::min(kFoldMost - 1, n - first);
      group[0] = block;
      for (int r = 0; r < more; ++r)
        group[r + 1] = inputs[first + r] + base;
      fold_any<T, Op>(block, group, more + 1, m, first + more == n ? divisor : 0);
    }
    copy_bytes(out + base, block, m * sizeof(T));
  }
}

template <class T, ReduceOp Op>
void reduce_many_of(T* out, const T* const* inputs, int n, std::size_t count) noexcept {
  if constexpr (std::is_same_v<T, Half>) {
#if defined(__x86_64__)
    if (has_f16c()) return fold_half_f16c<Op>(out, inputs, n, count);
#endif
    reduce_many_packed<T, Op>(out, inputs, n, count);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
#if defined(__x86_64__)
    if (has_avx2()) return fold_bf16_avx2<Op>(out, inputs, n, count);
#endif
    if (n > kFoldMost) return reduce_many_packed<T, Op>(out, inputs, n, count);
    with_count(n, [&](auto inputs_count) {
      fold_bf16<Op, decltype(inputs_count)::value>(out, inputs, count);
    });
  } else {
    reduce_many_typed<T, Op>(out, inputs, n, count);
  }
}

template <class T>
void reduce_many_op(ReduceOp op, void* out, const void* const* inputs, int n,
                    std::size_t count) noexcept {
  auto* o = static_cast<T*>(out);
  const auto* const* in = reinterpret_cast<const T* const*>(inputs);
  switch (op) {
    case ReduceOp::sum:
      return reduce_many_of<T, ReduceOp::sum>(o, in, n, count);
    case ReduceOp::avg:
      return reduce_many_of<T, ReduceOp::avg>(o, in, n, count);
    case ReduceOp::prod:
      return reduce_many_of<T, ReduceOp::prod>(o, in, n, count);
    case ReduceOp::min:
      return reduce_many_of<T, ReduceOp::min>(o, in, n, count);
    case ReduceOp::max:
      return reduce_many_of<T, ReduceOp::max>(o, in, n, count);
  }
}

}  // namespace

void reduce_many(DataType type, ReduceOp op, void* out, const void* const* inputs, int n,
                 std::size_t count) noexcept {
  // Two inputs: reduce_to's one pass (the same bits), which vectorizes also
  // when `out` is one of them.
  if (n == 2 && op != ReduceOp::avg && type != DataType::f16 && type != DataType::bf16)
    return reduce_to(type, op, out, inputs[0], inputs[1], count);
  with_element_type(type, [&](auto* typed) {
    reduce_many_op<std::remove_pointer_t<decltype(typed)>>(op, out, inputs, n, count);
  });
}

void reduce_into(DataType type, ReduceOp op, void* accumulate, const void* input,
                 std::size_t count) noexcept {
  reduce_to(type, op, accumulate, accumulate, input, count);
}

void reduce_to(DataType type, ReduceOp op, void* out, const void* a, const void* b,
               std::size_t count) noexcept {
  with_element_type(type, [&](auto* typed) {
    reduce_typed<std::remove_pointer_t<decltype(typed)>>(op, out, a, b, count);
  });
}

void finish_average(DataType type, void* data, std::size_t count, int ranks) noexcept {
  with_element_type(type, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    if constexpr (kPacked<T>) {
      divide_packed<T>(data, count, ranks);
    } else {
      divide_typed<T>(data, count, ranks);
    }
  });
}

}  // namespace cohort::detail
