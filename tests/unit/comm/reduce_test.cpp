// Reduction kernels, half-precision conversions and the backend registry.
#include "comm/reduce.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include <cohort/communicator.hpp>
#include <cohort/store.hpp>

#include "comm/registry.hpp"

namespace cohort::detail {
namespace {

template <class T>
std::vector<T> reduced(ReduceOp op, std::vector<T> a, const std::vector<T>& b) {
  reduce_into(data_type_of<T>(), op, a.data(), b.data(), a.size());
  return a;
}

TEST(Reduce, EveryOpOnIntegersAndFloats) {
  const std::vector<std::int32_t> a{1, -5, 7}, b{4, 3, -2};
  EXPECT_EQ(reduced(ReduceOp::sum, a, b), (std::vector<std::int32_t>{5, -2, 5}));
  EXPECT_EQ(reduced(ReduceOp::prod, a, b), (std::vector<std::int32_t>{4, -15, -14}));
  EXPECT_EQ(reduced(ReduceOp::min, a, b), (std::vector<std::int32_t>{1, -5, -2}));
  EXPECT_EQ(reduced(ReduceOp::max, a, b), (std::vector<std::int32_t>{4, 3, 7}));
  EXPECT_EQ(reduced(ReduceOp::avg, a, b), reduced(ReduceOp::sum, a, b));  // divided later
  const std::vector<double> x{0.5, -1}, y{0.25, 3};
  EXPECT_EQ(reduced(ReduceOp::sum, x, y), (std::vector<double>{0.75, 2}));
  EXPECT_EQ(reduced(ReduceOp::min, x, y), (std::vector<double>{0.25, -1}));
}

TEST(Reduce, IntegersWrapAroundInsteadOfOverflowing) {
  EXPECT_EQ(reduced<std::int8_t>(ReduceOp::sum, {127}, {1}), (std::vector<std::int8_t>{-128}));
  EXPECT_EQ(reduced<std::uint8_t>(ReduceOp::prod, {16}, {17}), (std::vector<std::uint8_t>{16}));
  EXPECT_EQ(reduced<std::int64_t>(ReduceOp::sum, {std::numeric_limits<std::int64_t>::max()}, {1}),
            (std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min()}));
}

TEST(Reduce, AverageDividesAndTruncatesIntegers) {
  std::vector<std::int32_t> ints{7, -7, 8};
  finish_average(DataType::i32, ints.data(), ints.size(), 2);
  EXPECT_EQ(ints, (std::vector<std::int32_t>{3, -3, 4}));
  std::vector<float> floats{3, 1};
  finish_average(DataType::f32, floats.data(), floats.size(), 4);
  EXPECT_EQ(floats, (std::vector<float>{0.75f, 0.25f}));
}

TEST(Reduce, HalfAndBFloat16ComputeInFloat) {
  std::vector<Half> a{Half::from_float(1.5f)}, b{Half::from_float(2.25f)};
  reduce_into(DataType::f16, ReduceOp::sum, a.data(), b.data(), 1);
  EXPECT_EQ(a[0].to_float(), 3.75f);
  std::vector<BFloat16> c{BFloat16::from_float(3.0f)}, d{BFloat16::from_float(-0.5f)};
  reduce_into(DataType::bf16, ReduceOp::prod, c.data(), d.data(), 1);
  EXPECT_EQ(c[0].to_float(), -1.5f);
}

// reduce_many of copies of `inputs`, into a separate buffer (`into` -1) or
// into the copy of input `into`; returns what it wrote.
template <class T>
std::vector<T> reduced_many(ReduceOp op, const std::vector<std::vector<T>>& inputs, int into) {
  std::vector<std::vector<T>> copies = inputs;
  std::vector<const void*> pointers;
  for (const auto& input : copies)
    pointers.push_back(input.data());
  const std::size_t count = inputs[0].size();
  std::vector<T> separate(count);
  T* out = into < 0 ? separate.data() : copies[static_cast<std::size_t>(into)].data();
  reduce_many(data_type_of<T>(), op, out, pointers.data(), static_cast<int>(inputs.size()), count);
  return std::vector<T>(out, out + count);
}

// reduce_many against a left fold element by element, for 1 to 20 inputs
// (one pass up to 8, blocks of 512 beyond), into a separate buffer and into
// each of first, middle and last input. Floats whose sum depends on the
// order (1e8 + 1 - 1e8) check that it is rank order.
template <class T>
void expect_left_fold(ReduceOp op) {
  for (int n = 1; n <= 20; ++n) {
    for (const std::size_t count :
         {std::size_t{1}, std::size_t{511}, std::size_t{513}, std::size_t{1500}}) {
      std::vector<std::vector<T>> inputs(static_cast<std::size_t>(n), std::vector<T>(count));
      for (int r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < count; ++i) {
          const long pattern[] = {100000000, 1, -100000000, 3, -2, 7};
          inputs[static_cast<std::size_t>(r)][i] = static_cast<T>(
              pattern[(static_cast<std::size_t>(r) + i) % 6] % (sizeof(T) < 4 ? 5 : 1000000000));
        }
      }
      std::vector<T> expected(count);
      for (std::size_t i = 0; i < count; ++i) {
        T value = inputs[0][i];
        for (int r = 1; r < n; ++r) {
          std::vector<T> a{value}, b{inputs[static_cast<std::size_t>(r)][i]};
          reduce_into(data_type_of<T>(), op, a.data(), b.data(), 1);
          value = a[0];
        }
        expected[i] = value;
      }
      if (op == ReduceOp::avg) finish_average(data_type_of<T>(), expected.data(), count, n);
      for (const int into : {-1, 0, n / 2, n - 1}) {
        ASSERT_EQ(reduced_many(op, inputs, into), expected)
            << "op " << to_string(op) << ", " << n << " inputs of " << count << ", into " << into;
      }
    }
  }
}

TEST(Reduce, ManyInputsFoldLeftToRightAlsoIntoOneOfThem) {
  for (const ReduceOp op :
       {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
    expect_left_fold<float>(op);
    expect_left_fold<double>(op);
    expect_left_fold<std::int32_t>(op);
    expect_left_fold<std::int8_t>(op);
  }
}

// f16/bf16: accumulated in float left to right and rounded once, in 8-wide
// registers (F16C, AVX2) or in blocks, with the tail element by element.
template <class T>
void expect_float_fold(ReduceOp op) {
  for (int n = 1; n <= 12; ++n) {
    for (const std::size_t count : {std::size_t{3}, std::size_t{8}, std::size_t{517}}) {
      std::vector<std::vector<T>> inputs(static_cast<std::size_t>(n), std::vector<T>(count));
      for (int r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < count; ++i) {
          const float values[] = {1.0f, 0.0009765625f, -3.5f, 1000.0f, -0.125f, 7.0f, 0.3333f};
          inputs[static_cast<std::size_t>(r)][i] =
              T::from_float(values[(static_cast<std::size_t>(r) * 3 + i) % 7]);
        }
      }
      std::vector<T> expected(count);
      for (std::size_t i = 0; i < count; ++i) {
        float value = inputs[0][i].to_float();
        for (int r = 1; r < n; ++r) {
          const float next = inputs[static_cast<std::size_t>(r)][i].to_float();
          switch (op) {
            case ReduceOp::sum:
            case ReduceOp::avg:
              value += next;
              break;
            case ReduceOp::prod:
              value *= next;
              break;
            case ReduceOp::min:
              value = next < value ? next : value;
              break;
            case ReduceOp::max:
              value = value < next ? next : value;
              break;
          }
        }
        if (op == ReduceOp::avg) value /= static_cast<float>(n);
        expected[i] = T::from_float(value);
      }
      for (const int into : {-1, n - 1}) {
        const std::vector<T> out = reduced_many(op, inputs, into);
        for (std::size_t i = 0; i < count; ++i) {
          ASSERT_EQ(out[i].bits, expected[i].bits)
              << "op " << to_string(op) << ", " << n << " inputs of " << count << ", element " << i
              << ", into " << into;
        }
      }
    }
  }
}

TEST(Reduce, HalfAndBFloat16AccumulateInFloatAndRoundOnce) {
  for (const ReduceOp op :
       {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
    expect_float_fold<Half>(op);
    expect_float_fold<BFloat16>(op);
  }
}

TEST(HalfPrecision, KnownEncodings) {
  EXPECT_EQ(Half::from_float(1.0f).bits, 0x3c00);
  EXPECT_EQ(Half::from_float(-2.0f).bits, 0xc000);
  EXPECT_EQ(Half::from_float(65504.0f).bits, 0x7bff);                          // largest finite
  EXPECT_EQ(Half::from_float(65520.0f).bits, 0x7c00);                          // rounds to infinity
  EXPECT_EQ(Half::from_float(std::ldexp(1.0f, -24)).bits, 0x0001);             // smallest subnormal
  EXPECT_EQ(Half::from_float(std::ldexp(1.0f, -26)).bits, 0x0000);             // rounds to zero
  EXPECT_EQ(Half::from_float(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);      // tie to even
  EXPECT_EQ(Half::from_float(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);  // tie to even
  EXPECT_TRUE(std::isnan(Half::from_float(std::nanf("")).to_float()));
  EXPECT_EQ(Half{0x7bff}.to_float(), 65504.0f);
  EXPECT_EQ(Half{0x0001}.to_float(), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(Half{0x7c00}.to_float()));
  // Every half converts to float and back unchanged (NaNs stay NaNs).
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const Half h{static_cast<std::uint16_t>(bits)};
    const float value = h.to_float();
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(Half::from_float(value).to_float()));
    } else {
      ASSERT_EQ(Half::from_float(value).bits, bits) << std::hex << bits;
    }
  }
}

TEST(HalfPrecision, BFloat16Encodings) {
  EXPECT_EQ(BFloat16::from_float(1.0f).bits, 0x3f80);
  EXPECT_EQ(BFloat16::from_float(-3.0f).bits, 0xc040);
  EXPECT_EQ(BFloat16::from_float(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);  // tie to even
  EXPECT_EQ(BFloat16::from_float(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(BFloat16::from_float(std::nanf("")).to_float()));
  EXPECT_EQ(BFloat16{0x3f80}.to_float(), 1.0f);
}

TEST(BackendRegistry, SelectsByNameOrPriorityAndExplainsRefusals) {
  LaunchInfo alone;
  alone.world_size = {1, "test"};
  BackendContext context;
  context.info = &alone;
  context.timeout = std::chrono::seconds(1);
  EXPECT_EQ(create_communicator(context, "")->backend(), "self");
  EXPECT_EQ(create_communicator(context, "self")->backend(), "self");
  EXPECT_EQ(choose_backend(context, ""), "self");
  try {
    create_communicator(context, "nccl-typo");
    FAIL() << "accepted an unknown backend";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("the backends of this build are: self"),
              std::string::npos)
        << error.what();
    for (const std::string& name : compiled_backends()) {
      EXPECT_NE(std::string(error.what()).find(name), std::string::npos) << error.what();
    }
  }
  LaunchInfo four;
  four.world_size = {4, "test"};
  BackendContext wide;  // and no store: no backend of this build can connect 4 ranks
  wide.info = &four;
  wide.timeout = std::chrono::seconds(1);
  EXPECT_THROW(create_communicator(wide, "self"), InvalidArgument);
  try {
    create_communicator(wide, "");
    FAIL() << "served 4 ranks with no backend able to";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("self: it serves a world of one"), std::string::npos)
        << error.what();
  }
}

// Choosing without connecting (World::backend before communicator()), hier
// goes by the launcher's word, and every rank of a job must hear the same:
// ranks 0 and 3 alone on their hosts beside a host of two (1, 2, 1) too.
TEST(BackendRegistry, HierGivesEveryRankOfAJobTheSameVerdictBeforeTheyMeet) {
  const BackendEntry* hier = nullptr;
  for (const BackendEntry& entry : backends())
    if (entry.name == "hier") hier = &entry;
  ASSERT_NE(hier, nullptr);
  if (!hier->built) GTEST_SKIP() << "this build has no hier (COHORT_WITH_HIER=OFF)";
  const auto verdict = [&](int world, int nodes, int local) {
    LaunchInfo info;
    info.world_size = {world, "test"};
    info.num_nodes = {nodes, "test"};
    info.local_world_size = {local, "test"};
    BackendContext context;
    context.info = &info;
    // A store is needed to meet, not to judge: this one is never read.
    context.store = std::make_shared<PrefixStore>("unread", nullptr);
    return hier->unviable_because(context);
  };
  for (int local : {1, 2})
    EXPECT_EQ(verdict(4, 3, local), "") << "local world " << local;
  EXPECT_NE(verdict(3, 3, 1), "") << "every host runs one rank";
  EXPECT_NE(verdict(4, 1, 4), "") << "one host";
}

}  // namespace
}  // namespace cohort::detail
