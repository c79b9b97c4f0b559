// cohort's own store protocol (protocol.hpp, docs/store-protocol.md) on the
// store's transport: a handshake in which each side proves it knows the job
// token (and, across hosts without a secret, MUNGE proves the user), then one
// framed request at a time; a GET or WAIT of keys not yet set waits, with a
// deadline, while later frames stay buffered; on a multiplexed connection
// (Op::multiplex) every frame carries a tag and a wait holds nothing behind it.
#pragma once

#include "store/store_protocol.hpp"

namespace cohort::detail {

class CohortProtocol final : public StoreProtocol {
 public:
  bool has_handshake() const override { return true; }
  std::string refusal(const std::string& why) const override;
  bool handle(StoreCore& core, Id id, Connection& connection) override;
  void answer_wait(StoreCore& core, Connection& connection, const Wait& wait,
                   store_protocol::Tag tag) override;
  void answer_timeout(Connection& connection, const std::vector<std::string>& missing,
                      store_protocol::Tag tag) override;
  std::size_t receive_limit(const StoreCore& core, const Connection& connection) const override;

 private:
  void handshake(StoreCore& core, Connection& connection, std::string_view payload);
  void hello(StoreCore& core, Connection& connection, std::string_view payload);
  void refuse(StoreCore& core, Connection& connection, const std::string& why);
  void request(StoreCore& core, Id id, Connection& connection, std::string_view payload);
  // A GET, WAIT, MULTI_GET or WAIT_FOR: answered now, or when it holds.
  void wait_for(StoreCore& core, Id id, Connection& connection, Wait& wait, std::int64_t timeout_ms,
                store_protocol::Tag tag);
};

}  // namespace cohort::detail
