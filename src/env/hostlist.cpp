// Slurm hostlist expressions: expand and compress. Grammar and the places
// where it deliberately accepts more than scontrol: docs/hostlist.md.
#include <algorithm>
#include <cctype>

#include <cohort/errors.hpp>
#include <cohort/launch_env.hpp>

#include "core/strings.hpp"

namespace cohort::hostlist {
namespace {

using detail::cat;

// More digits than this do not fit an unsigned 64-bit number in every case.
constexpr std::size_t kMaxDigits = 18;
// Memory one expression may expand to (names and their strings).
constexpr std::size_t kMaxExpandedBytes = std::size_t{64} << 20;

bool is_delimiter(char c) {
  return c == ',' || std::isspace(static_cast<unsigned char>(c));
}
bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

std::string padded(std::uint64_t number, std::size_t width) {
  std::string digits = std::to_string(number);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// A bracket group's range "007-012": numbers printed at least `width` wide.
struct Range {
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  std::size_t width = 0;
  std::size_t size() const { return static_cast<std::size_t>(high - low) + 1; }
  std::size_t widest() const { return std::max(width, std::to_string(high).size()); }
};

// One bracket group: its ranges in order, as many numbers as they hold.
struct Group {
  std::vector<Range> ranges;
  std::size_t size = 0;
};

// A digit of the odometer that walks a name's groups: where it is in a group.
struct Place {
  std::size_t range = 0;
  std::uint64_t offset = 0;
  std::string number(const Group& group) const {
    const Range& at = group.ranges[range];
    return padded(at.low + offset, at.width);
  }
  // Steps on; false when it wrapped round to the group's first number.
  bool advance(const Group& group) {
    if (++offset < group.ranges[range].size()) return true;
    offset = 0;
    if (++range < group.ranges.size()) return true;
    range = 0;
    return false;
  }
};

// Reads and checks the whole expression, counts every host, and makes the
// strings of the first `keep` only: the first host of a 100,000-node list
// costs no more than that of a 2-node one.
class Parser {
 public:
  Parser(std::string_view expression, std::size_t max_hosts, std::size_t keep)
      : text_(expression), max_hosts_(std::min(max_hosts, kMaxHosts)), keep_(keep) {}

  Summary parse() {
    std::size_t start = 0;
    int depth = 0;
    for (std::size_t i = 0; i <= text_.size(); ++i) {
      const bool end = i == text_.size();
      if (!end && text_[i] == '[') {
        if (depth++ > 0) fail(i, "'[' inside a bracket group: groups do not nest");
      } else if (!end && text_[i] == ']') {
        if (depth-- == 0) fail(i, "']' without a matching '['");
      } else if (end || (depth == 0 && is_delimiter(text_[i]))) {
        if (end && depth > 0) fail(text_.rfind('['), "'[' is never closed");
        if (i > start) expand_name(start, i);
        start = i + 1;
      }
    }
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(std::size_t position, std::string_view problem) const {
    throw InvalidArgument(
        cat("hostlist '", text_, "': ", problem, " (at character ", position + 1, ")"));
  }

  // One name with its bracket groups, text_[begin, end), expanded in
  // scontrol's order: the last group varies fastest, then the first, the
  // second, ... (with two groups, simply the leftmost varies slowest).
  void expand_name(std::size_t begin, std::size_t end) {
    std::vector<std::string_view> literals;  // around and between the groups
    std::vector<Group> groups;
    std::size_t count = 1;
    for (std::size_t i = begin;;) {
      std::size_t open = std::min(text_.find('[', i), end);
      literals.push_back(text_.substr(i, open - i));
      // After each group, and for a name without any (the hostlist fuzzer
      // found a long list of plain names going past the bound).
      if (count + out_.count > max_hosts_)
        fail(begin, cat("names more than ", max_hosts_, " hosts"));
      if (open == end) break;
      const std::size_t close = text_.find(']', open);
      groups.push_back(read_group(open + 1, close));
      count *= groups.back().size;
      i = close + 1;
    }
    // Checked before a byte is spent: a short expression of long names must
    // not take gigabytes only to be refused.
    std::size_t width = 0;
    for (std::string_view literal : literals)
      width += literal.size();
    for (const Group& group : groups) {
      std::size_t widest = 0;
      for (const Range& range : group.ranges)
        widest = std::max(widest, range.widest());
      width += widest;
    }
    bytes_ += count * (width + sizeof(std::string));
    if (bytes_ > kMaxExpandedBytes) {
      fail(begin, cat("expands to more than ", kMaxExpandedBytes >> 20, " MiB of host names"));
    }
    out_.count += count;

    std::vector<std::size_t> fastest_first;
    if (!groups.empty()) fastest_first.push_back(groups.size() - 1);
    for (std::size_t g = 0; g + 1 < groups.size(); ++g)
      fastest_first.push_back(g);
    std::vector<Place> places(groups.size());
    for (std::size_t n = 0; n < count && out_.hosts.size() < keep_; ++n) {
      std::string host(literals[0]);
      for (std::size_t g = 0; g < groups.size(); ++g) {
        host.append(places[g].number(groups[g])).append(literals[g + 1]);
      }
      out_.hosts.push_back(std::move(host));
      for (std::size_t g : fastest_first) {  // advance the odometer
        if (places[g].advance(groups[g])) break;
      }
    }
  }

  // "001-003,010" at text_[begin, end) -> 001-003 and 010.
  Group read_group(std::size_t begin, std::size_t end) {
    Group group;
    std::size_t i = begin;
    while (true) {
      std::size_t comma = text_.find(',', i);
      if (comma > end) comma = end;
      group.ranges.push_back(read_range(i, comma, group.size));
      group.size += group.ranges.back().size();
      if (comma == end) return group;
      i = comma + 1;
    }
  }

  std::uint64_t read_number(std::size_t begin, std::size_t end) const {
    if (begin == end) fail(begin, "a number is missing in a bracket group");
    for (std::size_t i = begin; i < end; ++i) {
      if (!is_digit(text_[i])) {
        fail(i, cat("'", text_[i],
                    "' in a bracket group, which holds only numbers and ranges "
                    "like 1-3,7"));
      }
    }
    if (end - begin > kMaxDigits)
      fail(begin, cat("a number has more than ", kMaxDigits, " digits"));
    return static_cast<std::uint64_t>(*detail::parse_int(text_.substr(begin, end - begin)));
  }

  // `before`: how many numbers the group holds already.
  Range read_range(std::size_t begin, std::size_t end, std::size_t before) const {
    std::size_t dash = text_.find('-', begin);
    if (dash > end) dash = end;
    const std::uint64_t low = read_number(begin, dash);
    const std::uint64_t high = dash == end ? low : read_number(dash + 1, end);
    if (high < low) fail(begin, cat("range ", low, "-", high, " runs backwards"));
    if (high - low >= max_hosts_ - before) {
      fail(begin, cat("names more than ", max_hosts_, " hosts"));
    }
    return {low, high, dash - begin};  // zero padding: the lower bound's width
  }

  std::string_view text_;
  std::size_t max_hosts_;
  std::size_t keep_;
  std::size_t bytes_ = 0;  // what the hosts counted so far would take
  Summary out_;
};

// A host split as prefix + trailing number ("rack1-n01" -> "rack1-n", "01").
struct Split {
  std::string_view prefix;
  std::string_view digits;  // empty: no trailing number
  std::uint64_t number = 0;
};

Split split(std::string_view host) {
  std::size_t start = host.size();
  while (start > 0 && is_digit(host[start - 1]))
    --start;
  if (start == host.size() || host.size() - start > kMaxDigits) return {host, {}, 0};
  std::string_view digits = host.substr(start);
  return {host.substr(0, start), digits, static_cast<std::uint64_t>(*detail::parse_int(digits))};
}

}  // namespace

std::vector<std::string> expand(std::string_view expression, std::size_t max_hosts) {
  return Parser(expression, max_hosts, kMaxHosts).parse().hosts;
}

Summary summarize(std::string_view expression, std::size_t keep) {
  return Parser(expression, kMaxHosts, keep).parse();
}

std::vector<std::string> expand(std::string_view expression) {
  return expand(expression, kMaxHosts);
}

std::string compress(std::span<const std::string> hosts) {
  for (const std::string& host : hosts) {
    for (char c : host) {
      if (is_delimiter(c) || c == '[' || c == ']') {
        throw InvalidArgument(cat("cannot compress host name '", host, "': it contains '", c,
                                  "', which hostlists use as syntax"));
      }
    }
  }
  std::vector<std::string> items;
  std::size_t i = 0;
  while (i < hosts.size()) {
    const Split first = split(hosts[i]);
    // The group: following hosts with the same prefix and a trailing number.
    std::size_t group_end = i + 1;
    while (!first.digits.empty() && group_end < hosts.size()) {
      const Split next = split(hosts[group_end]);
      if (next.digits.empty() || next.prefix != first.prefix) break;
      ++group_end;
    }
    if (group_end - i == 1) {
      items.push_back(hosts[i++]);
      continue;
    }
    // Runs of consecutive numbers that all print at the run's first width.
    std::vector<std::string> ranges;
    while (i < group_end) {
      const Split low = split(hosts[i]);
      std::size_t run_end = i + 1;
      std::uint64_t expected = low.number + 1;
      while (run_end < group_end &&
             split(hosts[run_end]).digits == padded(expected, low.digits.size())) {
        ++run_end;
        ++expected;
      }
      ranges.push_back(run_end - i == 1 ? std::string(low.digits)
                                        : cat(low.digits, "-", split(hosts[run_end - 1]).digits));
      i = run_end;
    }
    items.push_back(cat(first.prefix, "[", detail::join(ranges, ","), "]"));
  }
  return detail::join(items, ",");
}

}  // namespace cohort::hostlist
