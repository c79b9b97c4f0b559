// Element-wise reductions for every DataType and ReduceOp: what backends
// apply to received data, and what tests compute serially to check them.
#pragma once

#include <cstddef>

#include <cohort/communicator.hpp>

namespace cohort::detail {

/// accumulate[i] = op(accumulate[i], input[i]) for `count` elements of `type`.
/// `avg` accumulates like `sum` (finish with finish_average). Integer sums and
/// products wrap around (two's complement) instead of overflowing; f16/bf16
/// are computed in float and rounded back.
void reduce_into(DataType type, ReduceOp op, void* accumulate, const void* input,
                 std::size_t count) noexcept;

/// out[i] = op(a[i], b[i]) in one pass, like reduce_into; `out` may be `a`
/// or `b`.
void reduce_to(DataType type, ReduceOp op, void* out, const void* a, const void* b,
               std::size_t count) noexcept;

/// out[i] = op(inputs[0][i], inputs[1][i], ..., inputs[n-1][i]), combined in
/// that order, so every rank that reduces the same inputs gets the same bits.
/// `avg` divides the sum by n. f16/bf16 accumulate in float and round once
/// (closer than rounding after each step). `out` may be one of the inputs.
/// Up to 8 inputs in one pass (the loop over inputs unrolled, the one over
/// elements vectorized), more a block in L1 at a time; f16/bf16 in float
/// blocks, f16 converted with F16C where the CPU has it.
void reduce_many(DataType type, ReduceOp op, void* out, const void* const* inputs, int n,
                 std::size_t count) noexcept;

/// Divides `count` elements by `ranks` (integers truncate toward zero): the
/// last step of `avg`.
void finish_average(DataType type, void* data, std::size_t count, int ranks) noexcept;

}  // namespace cohort::detail
