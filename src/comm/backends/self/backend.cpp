#include <cstring>
#include <deque>
#include <map>

#include <cohort/errors.hpp>

#include "comm/backends/self/factory.hpp"
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

  // A message to oneself is buffered until received, as MPI allows.
  void send(Buffer data, int peer, int tag, Duration) override {
    require_rank("send", "peer", peer, 1);
    const char* bytes = static_cast<const char*>(data.data);
    mailbox_[tag].push_back({data.type, std::string(bytes, bytes + data.bytes())});
  }
  void recv(Buffer data, int peer, int tag, Duration timeout) override {
    require_rank("recv", "peer", peer, 1);
    auto box = mailbox_.find(tag);
    if (box == mailbox_.end() || box->second.empty()) {
      // Nobody else can ever send it: waiting `timeout` would only delay this.
      throw Timeout(cat("recv from rank 0 with tag ", tag,
                        ": no such message was sent, and in a "
                        "group of one none can arrive (timeout ",
                        timeout.count(), " ms)"));
    }
    Message message = std::move(box->second.front());
    box->second.pop_front();
    if (message.type != data.type || message.bytes.size() != data.bytes()) {
      throw InvalidArgument(cat("recv with tag ", tag, ": expected ", data.count, " ",
                                to_string(data.type), " elements, the message holds ",
                                message.bytes.size() / size_of(message.type), " ",
                                to_string(message.type)));
    }
    if (!message.bytes.empty()) std::memcpy(data.data, message.bytes.data(), message.bytes.size());
  }

  std::unique_ptr<Communicator> split(int color, int) override {
    if (color < 0) return nullptr;
    return std::make_unique<SelfCommunicator>(timeout_);
  }

 private:
  struct Message {
    DataType type;
    std::string bytes;
  };
  Duration timeout_;
  std::map<int, std::deque<Message>> mailbox_;
};

}  // namespace

std::unique_ptr<Communicator> create(Communicator::Duration timeout) {
  return std::make_unique<SelfCommunicator>(timeout);
}

}  // namespace cohort::detail::self_backend
