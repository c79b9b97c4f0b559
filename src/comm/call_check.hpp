// Checked calls (COHORT_CHECK_CALLS=1, Communicator::check_calls): before
// each collective, every rank's description of the call it is making goes
// to every other rank (one small all_gather through the backend itself),
// and a call that differs from another rank's (another collective, count,
// type, op or root) is refused on every rank alike, naming both, before any
// rank enters it. Without the check such a mismatch hangs, returns wrong
// sums, or ends the process, depending on the backend (docs/communicator.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <cohort/communicator.hpp>

namespace cohort::detail {

class Backend;

/// What every rank must agree on about one collective call.
struct CallPrint {
  enum class Kind : std::uint8_t {
    all_reduce,
    broadcast,
    reduce,
    all_gather,
    gather,
    scatter,
    reduce_scatter,
    all_to_all,
    barrier,
    split,
    allocate,
  };
  static constexpr std::uint8_t kNone = 0xff;  // no type, or no op
  Kind kind = Kind::barrier;
  std::uint8_t type = kNone;  // DataType
  std::uint8_t op = kNone;    // ReduceOp
  std::int32_t root = -1;
  std::uint64_t count = 0;  // elements each rank gives (bytes for allocate)

  /// "all_reduce (sum) of 4 f32", "broadcast from rank 0 of 8 f32", ...
  std::string describe() const;
};

/// Whether COHORT_CHECK_CALLS asks for checked calls ("1"; "0" or unset:
/// not). InvalidArgument for any other value.
bool check_calls_from_environment();

/// Every rank's print of the call, through `backend` (an all_gather of a
/// few bytes); InvalidArgument on every rank when any differs.
void check_call(Backend& backend, const CallPrint& mine, std::chrono::milliseconds timeout);

}  // namespace cohort::detail
