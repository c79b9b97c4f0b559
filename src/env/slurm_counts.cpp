#include "env/slurm_counts.hpp"

#include <limits>

#include "core/strings.hpp"

namespace cohort::detail {
namespace {

constexpr std::size_t kMaxNodes = std::size_t{1} << 20;

std::optional<int> to_count(std::string_view digits) {
  auto value = parse_int(digits);
  if (!value || *value < 0 || *value > std::numeric_limits<int>::max() || digits[0] == '-') {
    return std::nullopt;
  }
  return static_cast<int>(*value);
}

}  // namespace

std::optional<std::vector<int>> parse_slurm_counts(std::string_view text) {
  std::vector<int> counts;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (comma != std::string_view::npos && text.empty()) return std::nullopt;  // trailing ','

    int repeat = 1;
    if (std::size_t open = item.find("(x"); open != std::string_view::npos) {
      if (item.back() != ')') return std::nullopt;
      auto times = to_count(item.substr(open + 2, item.size() - open - 3));
      if (!times || *times == 0) return std::nullopt;
      repeat = *times;
      item = item.substr(0, open);
    }
    auto count = to_count(item);
    if (!count || counts.size() + static_cast<std::size_t>(repeat) > kMaxNodes) return std::nullopt;
    counts.insert(counts.end(), static_cast<std::size_t>(repeat), *count);
  }
  if (counts.empty()) return std::nullopt;
  return counts;
}

std::string format_slurm_counts(std::span<const int> counts) {
  std::string out;
  for (std::size_t i = 0; i < counts.size();) {
    std::size_t run = 1;
    while (i + run < counts.size() && counts[i + run] == counts[i])
      ++run;
    out += cat(out.empty() ? "" : ",", counts[i], run > 1 ? cat("(x", run, ")") : "");
    i += run;
  }
  return out;
}

}  // namespace cohort::detail
