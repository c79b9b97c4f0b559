// The table an exchange publishes in the job's store (src/store/exchange.cpp):
// 4-byte lengths and values, or a zstd frame of them; decoding must refuse
// whatever is not exactly the expected count, never read past the end, and
// never decompress more than the frame says (kMaxTableBytes at most).
#include <cstdlib>
#include <string>
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
    const std::string again = detail::encode_table(*values);
    // One plain encoding per table; a compressed one is any frame of it.
    if (table.size() < detail::kCompressTablesFrom && table.substr(0, 4) != "\xff\xff\xff\xff" &&
        again != table) {
      std::abort();
    }
    if (detail::decode_table(again, expected) != values) std::abort();
  }
  return 0;
}

}  // namespace cohort::fuzz
