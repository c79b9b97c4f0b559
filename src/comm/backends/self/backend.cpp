#include "comm/backend.hpp"

#include <cstring>

#include "comm/backends/self/factory.hpp"
#include "comm/local_mailbox.hpp"
#include "core/strings.hpp"

namespace cohort::detail::self_backend {
namespace {

void copy(const Buffer& from, const Buffer& to) {
  if (from.data != to.data) std::memmove(to.data, from.data, from.bytes());
}

// The Communicator in front has checked every argument; with one rank, what
// remains is copying input to output.
class SelfBackend final : public Backend {
 public:
  explicit SelfBackend(Duration timeout) : timeout_(timeout) {}

  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  std::string_view name() const noexcept override { return "self"; }
  Duration default_timeout() const noexcept override { return timeout_; }

  // Reducing one contribution: sum, prod, min, max are the value itself, and
  // avg divides by one.
  void all_reduce(Buffer, ReduceOp, Duration) override {}
  void broadcast(Buffer, int, Duration) override {}
  void reduce(Buffer, ReduceOp, int, Duration) override {}
  void all_gather(Buffer input, Buffer output, Duration) override { copy(input, output); }
  void gather(Buffer input, Buffer output, int, Duration) override { copy(input, output); }
  void scatter(Buffer input, Buffer output, int, Duration) override { copy(input, output); }
  void reduce_scatter(Buffer input, Buffer output, ReduceOp, Duration) override {
    copy(input, output);
  }
  void all_to_all(Buffer input, Buffer output, Duration) override { copy(input, output); }
  void barrier(Duration) override {}

  void send(Buffer data, int, int tag, Duration) override { mailbox_.post(data, tag); }
  void recv(Buffer data, int, int tag, Duration timeout) override {
    mailbox_.take(data, tag, timeout);
  }

  std::unique_ptr<Backend> split(int color, int) override {
    if (color < 0) return nullptr;
    return std::make_unique<SelfBackend>(timeout_);
  }

 private:
  Duration timeout_;
  LocalMailbox mailbox_;
};

}  // namespace

std::string unviable_because(const BackendContext& context) {
  const int size = context.info->world_size.value;
  return size == 1 ? std::string() : cat("it serves a world of one, this one has ", size, " ranks");
}

std::unique_ptr<Communicator> create(const BackendContext& context) {
  return std::make_unique<Communicator>(std::make_unique<SelfBackend>(context.timeout));
}

}  // namespace cohort::detail::self_backend
