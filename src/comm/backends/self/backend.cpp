#include <cstring>

#include <cohort/errors.hpp>

#include "comm/backends/self/factory.hpp"
#include "comm/local_mailbox.hpp"
#include "comm/reduce.hpp"
#include "core/strings.hpp"

namespace cohort::detail::self_backend {
namespace {

void copy(const Buffer& from, const Buffer& to) {
  if (from.data != to.data && from.count != 0) std::memmove(to.data, from.data, from.bytes());
}

class SelfCommunicator final : public Communicator {
 public:
  explicit SelfCommunicator(Duration timeout) : timeout_(timeout) {}

  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  std::string_view backend() const noexcept override { return "self"; }
  Duration default_timeout() const noexcept override { return timeout_; }

  // Reducing one contribution: sum, prod, min, max are the value itself, and
  // avg divides by one.
  void all_reduce(Buffer, ReduceOp, Duration) override {}
  void broadcast(Buffer, int root, Duration) override {
    require_rank("broadcast", "root", root, 1);
  }
  void reduce(Buffer, ReduceOp, int root, Duration) override {
    require_rank("reduce", "root", root, 1);
  }
  void all_gather(Buffer input, Buffer output, Duration) override {
    require_same_type("all_gather", input, output);
    require_count("all_gather", "output", output, input.count);
    copy(input, output);
  }
  void gather(Buffer input, Buffer output, int root, Duration) override {
    require_rank("gather", "root", root, 1);
    require_same_type("gather", input, output);
    require_count("gather", "output", output, input.count);
    copy(input, output);
  }
  void scatter(Buffer input, Buffer output, int root, Duration) override {
    require_rank("scatter", "root", root, 1);
    require_same_type("scatter", input, output);
    require_count("scatter", "input", input, output.count);
    copy(input, output);
  }
  void reduce_scatter(Buffer input, Buffer output, ReduceOp, Duration) override {
    require_same_type("reduce_scatter", input, output);
    require_count("reduce_scatter", "input", input, output.count);
    copy(input, output);
  }
  void all_to_all(Buffer input, Buffer output, Duration) override {
    require_same_type("all_to_all", input, output);
    require_count("all_to_all", "output", output, input.count);
    copy(input, output);
  }
  void barrier(Duration) override {}

  void send(Buffer data, int peer, int tag, Duration) override {
    require_rank("send", "peer", peer, 1);
    mailbox_.post(data, tag);
  }
  void recv(Buffer data, int peer, int tag, Duration timeout) override {
    require_rank("recv", "peer", peer, 1);
    mailbox_.take(data, tag, timeout);
  }

  std::unique_ptr<Communicator> split(int color, int) override {
    if (color < 0) return nullptr;
    return std::make_unique<SelfCommunicator>(timeout_);
  }

 private:
  Duration timeout_;
  LocalMailbox mailbox_;
};

}  // namespace

std::unique_ptr<Communicator> create(Communicator::Duration timeout) {
  return std::make_unique<SelfCommunicator>(timeout);
}

}  // namespace cohort::detail::self_backend
