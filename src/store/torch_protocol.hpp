// PyTorch's TCPStore protocol on the store's transport (its second port),
// every version torch_wire.hpp reads: requests answered as PyTorch's own
// server does, on keys under "torch:". There is no handshake (a peer is let
// in by who it is, admission.hpp); a connection's dialect is told from its
// first bytes. Its waits have no deadline on the server: a client gives up
// by itself, then sends CANCEL_WAIT (2.x), the one request taken while a
// wait is under way.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "store/store_protocol.hpp"
#include "store/torch_wire.hpp"

namespace cohort::detail {

/// Every key a PyTorch TCPStore client names is stored under this prefix.
inline constexpr std::string_view kTorchKeyPrefix = "torch:";

// What the store's TCPStore port and a relay's (torch_relay.hpp) share.

/// A connection's dialect from its first bytes: nullopt until they tell.
std::optional<torch_wire::Dialect> torch_dialect(std::string_view first_bytes) noexcept;
/// The bytes a PyTorch client may send ahead, unhandled.
std::size_t torch_receive_limit(const StoreCore& core);
/// A client asked what no PyTorch server here serves (torch_wire::Unsupported):
/// a client of this host (one of the job's) is unservable, and its job
/// ends; one elsewhere (anyone the network reaches) is only dropped.
void refuse_unsupported(StoreCore& core, KeySpace::Id id, Connection& connection,
                        torch_wire::Dialect dialect, const torch_wire::Unsupported& error);

class TorchProtocol final : public StoreProtocol {
 public:
  bool has_handshake() const override { return false; }
  std::string refusal(const std::string&) const override { return {}; }
  bool handle(StoreCore& core, Id id, Connection& connection) override;
  void answer_wait(StoreCore& core, Connection& connection, const Wait& wait,
                   store_protocol::Tag tag) override;
  void answer_timeout(Connection& connection, const std::vector<std::string>& missing,
                      store_protocol::Tag tag) override;
  std::size_t receive_limit(const StoreCore& core, const Connection& connection) const override;
};

}  // namespace cohort::detail
