// The connection to the job's store that cohort run's agent hands a worker
// it starts (COHORT_STORE_FD): one end of StoreServer::trusted_socket(),
// inherited across exec, so the worker needs no TCP connection and no
// handshake (docs/run.md).
#pragma once

#include <optional>
#include <string_view>

namespace cohort::detail {

/// The descriptor number `text` (COHORT_STORE_FD) says: 3 or more, digits
/// only; nullopt otherwise.
std::optional<int> parse_store_fd(std::string_view text) noexcept;

/// That descriptor, when it is a Unix socket whose peer is the process
/// `store_process` names ("pid:start", COHORT_STORE_PROCESS) and nobody in
/// this process took it before; -1 otherwise, and the caller connects over
/// TCP as it would without it (a program that closed the descriptor, or
/// reused its number, or a second cohort::init). The caller owns what it
/// gets, which is made close-on-exec: this process's own children connect
/// themselves.
int take_inherited_store_socket(std::string_view text, std::string_view store_process);

}  // namespace cohort::detail
