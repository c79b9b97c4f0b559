// The table an exchange publishes in the job's store (src/store/exchange.cpp):
// 4-byte lengths and values; decoding must refuse whatever is not exactly
// the expected count, and never read past the end.
#include <cstdlib>
#include <string_view>

#include "fuzz/fuzz_target.hpp"
#include "store/exchange.hpp"

namespace cohort::fuzz {

COHORT_FUZZ_TARGET(exchange_table) {
  if (size == 0) return 0;
  const int expected = data[0] % 8;  // the first byte: how many values to expect
  const std::string_view table(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto values = detail::decode_table(table, expected);
  if (values) {
    if (static_cast<int>(values->size()) != expected) std::abort();
    if (detail::encode_table(*values) != table) std::abort();  // one encoding per table
  }
  return 0;
}

}  // namespace cohort::fuzz
