// PyTorch's TCPStore protocol on a node's relay (StoreServer::Options::
// relay_to with a torch_port): the workers' MASTER_ADDR:MASTER_PORT is
// their own node's agent, which carries each query to the job's store in
// cohort's protocol (store/relay.hpp) and answers as PyTorch's server
// would. The job's store then holds a node's few connections instead of
// every rank's (docs/rendezvous.md, "PyTorch's clients through the relay").
//
// Each query becomes cohort requests on the same keys, under "torch:" as on
// the job's store's own TCPStore port (torch_protocol.hpp): SET, ADD,
// COMPARE_SET, DELETE, APPEND, the queues and LIST_KEYS join the relay's
// batches; GET and MULTI_GET (their client WAITs first), WAIT, CHECK and
// BARRIER (WAIT_FOR) take its lanes, where a node's ranks that ask the same
// share one request (a table's GET reaches the node once). A client's
// answers come in the order of its queries: a query that may wait goes up
// once the ones before it are answered, as the store itself takes them.
//
// One difference from PyTorch's server: a node's clients that WAIT on one
// queue (a blocking QUEUE_POP, PyTorch after 2.6) are woken together by
// one item, as one request stood for them; the pops that then find the
// queue empty are answered 0, as PyTorch's server answers a client that
// came after the item was taken.
//
// PyTorch's waits have no deadline on the server: the relay asks for
// kWaitSlice at a time, again while its client waits. CANCEL_WAIT (2.x) is
// answered at once, and the client's next queries go up at once: the
// canceled wait's answer, when it comes, goes nowhere (StoreCore::alias).
#pragma once

#include <chrono>
#include <memory>

#include "store/store_protocol.hpp"

namespace cohort::detail {

class TorchRelayProtocol final : public StoreProtocol {
 public:
  /// How long one WAIT that the relay sends for a client may wait.
  static constexpr std::chrono::milliseconds kWaitSlice{30000};

  bool has_handshake() const override { return false; }
  std::string refusal(const std::string&) const override { return {}; }
  bool handle(StoreCore& core, Id id, Connection& connection) override;
  /// Never called: nothing waits in a relay's own key space.
  void answer_wait(StoreCore&, Connection&, const Wait&, store_protocol::Tag) override {}
  void answer_timeout(Connection&, const std::vector<std::string>&, store_protocol::Tag) override {}
  std::size_t receive_limit(const StoreCore& core, const Connection& connection) const override;
  bool translates_relayed_answers() const override { return true; }
  bool relayed_answer(StoreCore& core, Id id, Connection& connection,
                      const std::shared_ptr<RelayedAnswer>& answer) override;
};

}  // namespace cohort::detail
