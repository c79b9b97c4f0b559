#include "comm/call_check.hpp"

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <cohort/errors.hpp>

#include "comm/backend.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

// The print as bytes, the same on every rank (one build, one architecture).
constexpr std::size_t kPrintBytes = 16;

void write_print(const CallPrint& print, unsigned char* out) {
  std::memset(out, 0, kPrintBytes);
  out[0] = static_cast<unsigned char>(print.kind);
  out[1] = print.type;
  out[2] = print.op;
  std::memcpy(out + 4, &print.root, sizeof(print.root));
  std::memcpy(out + 8, &print.count, sizeof(print.count));
}

CallPrint read_print(const unsigned char* in) {
  CallPrint print;
  print.kind = static_cast<CallPrint::Kind>(in[0]);
  print.type = in[1];
  print.op = in[2];
  std::memcpy(&print.root, in + 4, sizeof(print.root));
  std::memcpy(&print.count, in + 8, sizeof(print.count));
  return print;
}

std::string_view kind_name(CallPrint::Kind kind) {
  switch (kind) {
    case CallPrint::Kind::all_reduce:
      return "all_reduce";
    case CallPrint::Kind::broadcast:
      return "broadcast";
    case CallPrint::Kind::reduce:
      return "reduce";
    case CallPrint::Kind::all_gather:
      return "all_gather";
    case CallPrint::Kind::gather:
      return "gather";
    case CallPrint::Kind::scatter:
      return "scatter";
    case CallPrint::Kind::reduce_scatter:
      return "reduce_scatter";
    case CallPrint::Kind::all_to_all:
      return "all_to_all";
    case CallPrint::Kind::barrier:
      return "barrier";
    case CallPrint::Kind::split:
      return "split";
    case CallPrint::Kind::allocate:
      return "allocate";
  }
  return "an unknown call";
}

}  // namespace

std::string CallPrint::describe() const {
  std::string text(kind_name(kind));
  if (op != kNone) text += cat(" (", to_string(static_cast<ReduceOp>(op)), ")");
  if (root >= 0)
    text += cat(kind == Kind::reduce || kind == Kind::gather ? " to" : " from", " rank ", root);
  if (kind == Kind::allocate) return cat(text, " of ", count, " bytes");
  if (type != kNone) text += cat(" of ", count, " ", to_string(static_cast<DataType>(type)));
  return text;
}

bool check_calls_from_environment() {
  const char* value = std::getenv("COHORT_CHECK_CALLS");
  if (value == nullptr || std::string_view(value).empty() || std::string_view(value) == "0") {
    return false;
  }
  if (std::string_view(value) == "1") return true;
  throw InvalidArgument(cat("COHORT_CHECK_CALLS='", value,
                            "': set it to 1 to check every collective call against the other "
                            "ranks', or 0 (or unset) not to"));
}

void check_call(Backend& backend, const CallPrint& mine, std::chrono::milliseconds timeout) {
  const int n = backend.size();
  if (n == 1) return;
  std::vector<unsigned char> prints(kPrintBytes * static_cast<std::size_t>(n));
  unsigned char own[kPrintBytes];
  write_print(mine, own);
  backend.all_gather({own, kPrintBytes, DataType::u8}, {prints.data(), prints.size(), DataType::u8},
                     timeout);
  std::vector<int> differ;
  for (int r = 0; r < n; ++r) {
    if (std::memcmp(prints.data() + static_cast<std::size_t>(r) * kPrintBytes, own, kPrintBytes) !=
        0) {
      differ.push_back(r);
    }
  }
  if (differ.empty()) return;
  // Every rank has every print: each refuses, and says the same of the job.
  std::string others;
  constexpr std::size_t kNamed = 3;
  for (std::size_t i = 0; i < differ.size() && i < kNamed; ++i) {
    const int r = differ[i];
    others += cat(i == 0 ? "" : "; ", "rank ", r, " called ",
                  read_print(prints.data() + static_cast<std::size_t>(r) * kPrintBytes).describe());
  }
  if (differ.size() > kNamed) others += cat("; and ", differ.size() - kNamed, " more ranks");
  throw InvalidArgument(cat(mine.describe(), " on rank ", backend.rank(), " of ", n,
                            " does not match what other ranks called (", others,
                            "): every rank must make the same collective calls in the same "
                            "order (checked because COHORT_CHECK_CALLS=1); no rank made this one"));
}

}  // namespace cohort::detail
