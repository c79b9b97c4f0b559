#include <algorithm>
#include <cstring>
#include <numeric>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <sys/socket.h>

#include <cohort/errors.hpp>

#include "comm/backends/gloo/factory.hpp"
#include "comm/local_mailbox.hpp"
#include "comm/reduce.hpp"
#include "core/strings.hpp"

namespace cohort::detail::gloo_backend {
namespace {

// Gloo's rendezvous store interface over cohort's store. get() blocks until
// the key is set, which connectFullMesh relies on.
class StoreAdapter final : public ::gloo::rendezvous::Store {
 public:
  StoreAdapter(std::shared_ptr<cohort::Store> store, std::chrono::milliseconds timeout)
      : store_(std::move(store)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::string_view(data.data(), data.size()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string value = store_->get(key, timeout_);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<cohort::Store> store_;
  std::chrono::milliseconds timeout_;
};

// Calls `body` with a null pointer of the C++ type Gloo should see for
// `type`: one of the same size, so Gloo splits buffers between elements.
template <class Body>
void with_element(DataType type, Body&& body) {
  switch (type) {
    case DataType::f32:
      return body(static_cast<float*>(nullptr));
    case DataType::f64:
      return body(static_cast<double*>(nullptr));
    case DataType::f16:
    case DataType::bf16:
      return body(static_cast<std::uint16_t*>(nullptr));
    case DataType::i8:
      return body(static_cast<std::int8_t*>(nullptr));
    case DataType::u8:
      return body(static_cast<std::uint8_t*>(nullptr));
    case DataType::i32:
      return body(static_cast<std::int32_t*>(nullptr));
    case DataType::i64:
      return body(static_cast<std::int64_t*>(nullptr));
  }
}

// Gloo's reduction callback, c = a op b, for any element type and op (avg
// sums; the division follows the collective).
std::function<void(void*, const void*, const void*, size_t)> reduction(DataType type, ReduceOp op) {
  return [type, op](void* c, const void* a, const void* b, size_t n) {
    if (c == b) {
      reduce_into(type, op, c, a, n);  // every op is commutative
      return;
    }
    if (c != a) std::memmove(c, a, n * size_of(type));
    reduce_into(type, op, c, b, n);
  };
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(const Options& options, std::shared_ptr<::gloo::rendezvous::Context> context,
                   std::shared_ptr<::gloo::transport::Device> device)
      : options_(options), context_(std::move(context)), device_(std::move(device)) {}

  int rank() const noexcept override { return options_.rank; }
  int size() const noexcept override { return options_.size; }
  std::string_view backend() const noexcept override { return "gloo"; }
  Duration default_timeout() const noexcept override { return options_.timeout; }

  void all_reduce(Buffer data, ReduceOp op, Duration timeout) override {
    if (data.count == 0) return;
    guarded("all_reduce", [&] {
      ::gloo::AllreduceOptions opts(context_);
      with_element(data.type, [&](auto* typed) {
        opts.setOutput(static_cast<decltype(typed)>(data.data), data.count);
      });
      opts.setReduceFunction(reduction(data.type, op));
      opts.setTimeout(timeout);
      ::gloo::allreduce(opts);
    });
    if (op == ReduceOp::avg) finish_average(data.type, data.data, data.count, size());
  }

  void broadcast(Buffer data, int root, Duration timeout) override {
    require_rank("broadcast", "root", root, size());
    if (data.count == 0) return;
    guarded("broadcast", [&] {
      ::gloo::BroadcastOptions opts(context_);
      with_element(data.type, [&](auto* typed) {
        opts.setOutput(static_cast<decltype(typed)>(data.data), data.count);
      });
      opts.setRoot(root);
      opts.setTimeout(timeout);
      ::gloo::broadcast(opts);
    });
  }

  void reduce(Buffer data, ReduceOp op, int root, Duration timeout) override {
    require_rank("reduce", "root", root, size());
    if (data.count == 0) return;
    // Gloo's reduce writes into `output` on every rank; only the root's may change.
    std::vector<unsigned char> scratch(rank() == root ? 0 : data.bytes());
    void* output = rank() == root ? data.data : scratch.data();
    guarded("reduce", [&] {
      ::gloo::ReduceOptions opts(context_);
      with_element(data.type, [&](auto* typed) {
        using T = std::remove_pointer_t<decltype(typed)>;
        opts.setInput(static_cast<T*>(data.data), data.count);
        opts.setOutput(static_cast<T*>(output), data.count);
      });
      opts.setRoot(root);
      opts.setReduceFunction(reduction(data.type, op));
      opts.setTimeout(timeout);
      ::gloo::reduce(opts);
    });
    if (op == ReduceOp::avg && rank() == root) {
      finish_average(data.type, data.data, data.count, size());
    }
  }

  void all_gather(Buffer input, Buffer output, Duration timeout) override {
    require_same_type("all_gather", input, output);
    require_count("all_gather", "output", output, input.count * static_cast<std::size_t>(size()));
    if (input.count == 0) return;
    guarded("all_gather", [&] {
      ::gloo::AllgatherOptions opts(context_);
      with_element(input.type, [&](auto* typed) {
        using T = std::remove_pointer_t<decltype(typed)>;
        opts.setInput(static_cast<T*>(input.data), input.count);
        opts.setOutput(static_cast<T*>(output.data), output.count);
      });
      opts.setTimeout(timeout);
      ::gloo::allgather(opts);
    });
  }

  void gather(Buffer input, Buffer output, int root, Duration timeout) override {
    require_rank("gather", "root", root, size());
    if (rank() == root) {
      require_same_type("gather", input, output);
      require_count("gather", "output", output, input.count * static_cast<std::size_t>(size()));
    }
    if (input.count == 0) return;
    guarded("gather", [&] {
      ::gloo::GatherOptions opts(context_);
      with_element(input.type, [&](auto* typed) {
        using T = std::remove_pointer_t<decltype(typed)>;
        opts.setInput(static_cast<T*>(input.data), input.count);
        if (rank() == root) opts.setOutput(static_cast<T*>(output.data), output.count);
      });
      opts.setRoot(root);
      opts.setTimeout(timeout);
      ::gloo::gather(opts);
    });
  }

  void scatter(Buffer input, Buffer output, int root, Duration timeout) override {
    require_rank("scatter", "root", root, size());
    if (rank() == root) {
      require_same_type("scatter", input, output);
      require_count("scatter", "input", input, output.count * static_cast<std::size_t>(size()));
    }
    if (output.count == 0) return;
    guarded("scatter", [&] {
      ::gloo::ScatterOptions opts(context_);
      with_element(output.type, [&](auto* typed) {
        using T = std::remove_pointer_t<decltype(typed)>;
        if (rank() == root) {
          std::vector<T*> slices;
          slices.reserve(static_cast<std::size_t>(size()));
          for (int r = 0; r < size(); ++r) {
            slices.push_back(static_cast<T*>(input.data) +
                             static_cast<std::size_t>(r) * output.count);
          }
          opts.setInputs(slices, output.count);
        }
        opts.setOutput(static_cast<T*>(output.data), output.count);
      });
      opts.setRoot(root);
      opts.setTimeout(timeout);
      ::gloo::scatter(opts);
    });
  }

  void reduce_scatter(Buffer input, Buffer output, ReduceOp op, Duration timeout) override {
    require_same_type("reduce_scatter", input, output);
    require_count("reduce_scatter", "input", input,
                  output.count * static_cast<std::size_t>(size()));
    // All-reduce a copy, keep this rank's slice (twice the traffic of a
    // dedicated algorithm; correct first).
    std::vector<unsigned char> whole(input.bytes());
    if (!whole.empty()) std::memcpy(whole.data(), input.data, whole.size());
    all_reduce({whole.data(), input.count, input.type}, op, timeout);
    if (output.count != 0) {
      std::memmove(output.data, whole.data() + static_cast<std::size_t>(rank()) * output.bytes(),
                   output.bytes());
    }
  }

  void all_to_all(Buffer input, Buffer output, Duration timeout) override {
    require_same_type("all_to_all", input, output);
    require_count("all_to_all", "output", output, input.count);
    if (input.count % static_cast<std::size_t>(size()) != 0) {
      throw InvalidArgument(cat("all_to_all: input holds ", input.count,
                                " elements, not a multiple of the group size ", size()));
    }
    if (input.count == 0) return;
    // Gloo needs distinct buffers: in-place use goes through a copy.
    std::vector<unsigned char> copy;
    void* source = input.data;
    if (input.data == output.data) {
      copy.assign(static_cast<unsigned char*>(input.data),
                  static_cast<unsigned char*>(input.data) + input.bytes());
      source = copy.data();
    }
    guarded("all_to_all", [&] {
      ::gloo::AlltoallOptions opts(context_);
      with_element(input.type, [&](auto* typed) {
        using T = std::remove_pointer_t<decltype(typed)>;
        opts.setInput(static_cast<T*>(source), input.count);
        opts.setOutput(static_cast<T*>(output.data), output.count);
      });
      opts.setTimeout(timeout);
      ::gloo::alltoall(opts);
    });
  }

  void barrier(Duration timeout) override {
    guarded("barrier", [&] {
      ::gloo::BarrierOptions opts(context_);
      opts.setTimeout(timeout);
      ::gloo::barrier(opts);
    });
  }

  void send(Buffer data, int peer, int tag, Duration timeout) override {
    require_rank("send", "peer", peer, size());
    if (peer == rank()) return mailbox_.post(data, tag);  // no transport pair to oneself
    guarded("send", [&] {
      auto buffer = context_->createUnboundBuffer(data.data, data.bytes());
      buffer->send(peer, slot(tag));
      if (!buffer->waitSend(timeout)) throw Timeout(cat("send to rank ", peer, " timed out"));
    });
  }

  void recv(Buffer data, int peer, int tag, Duration timeout) override {
    require_rank("recv", "peer", peer, size());
    if (peer == rank()) return mailbox_.take(data, tag, timeout);
    guarded("recv", [&] {
      auto buffer = context_->createUnboundBuffer(data.data, data.bytes());
      buffer->recv(peer, slot(tag));
      if (!buffer->waitRecv(timeout)) throw Timeout(cat("recv from rank ", peer, " timed out"));
    });
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    // Everyone publishes (color, key); each group then connects on its own view.
    const std::string round = cat("split/", ++splits_);
    options_.store->set(cat(round, "/", rank()), cat(color, " ", key));
    std::vector<std::tuple<int, int, int>> members;  // key, rank, color
    for (int r = 0; r < size(); ++r) {
      const std::string entry = options_.store->get(cat(round, "/", r), options_.timeout);
      const std::size_t space = entry.find(' ');
      const int their_color = std::stoi(entry.substr(0, space));
      if (their_color == color) members.emplace_back(std::stoi(entry.substr(space + 1)), r, color);
    }
    if (color < 0) return nullptr;
    std::sort(members.begin(), members.end());
    Options sub = options_;
    sub.size = static_cast<int>(members.size());
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (std::get<1>(members[i]) == rank()) sub.rank = static_cast<int>(i);
    }
    sub.store = std::make_shared<PrefixStore>(cat(round, "/color", color), options_.store);
    return create(sub);
  }

 private:
  // Point-to-point messages use slots of their own, apart from collectives'.
  static std::uint64_t slot(int tag) {
    return (std::uint64_t{1} << 56) | static_cast<std::uint32_t>(tag);
  }

  // Gloo's exceptions become cohort's: a transport error means a peer is gone.
  template <class Body>
  void guarded(const char* collective, Body&& body) {
    try {
      body();
    } catch (const ::gloo::IoException& error) {
      throw PeerLost(cat(collective, " on rank ", rank(), " of ", size(),
                         ": a peer failed or left (gloo: ", error.what(), ")"),
                     -1);
    } catch (const ::gloo::Exception& error) {
      throw Error(cat(collective, " on rank ", rank(), ": gloo: ", error.what()));
    } catch (const ::gloo::EnforceNotMet& error) {
      throw Error(cat(collective, " on rank ", rank(), ": gloo: ", error.what()));
    }
  }

  Options options_;
  std::shared_ptr<::gloo::rendezvous::Context> context_;
  std::shared_ptr<::gloo::transport::Device> device_;
  int splits_ = 0;
  LocalMailbox mailbox_;
};

}  // namespace

std::unique_ptr<Communicator> create(const Options& options) {
  ::gloo::transport::tcp::attr attr;
  attr.hostname = options.address;
  attr.ai_family = AF_INET;
  std::shared_ptr<::gloo::transport::Device> device;
  try {
    device = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& error) {
    throw Error(cat("gloo: no TCP device on ", options.address, ": ", error.what(),
                    " (set COHORT_IFNAME to an interface that reaches the other ranks)"));
  }
  auto context = std::make_shared<::gloo::rendezvous::Context>(options.rank, options.size);
  context->setTimeout(options.timeout);  // before connecting: pairs keep it
  StoreAdapter store(options.store, options.timeout);
  try {
    context->connectFullMesh(store, device);
  } catch (const ::gloo::IoException& error) {
    throw PeerLost(cat("gloo: connecting rank ", options.rank, " of ", options.size,
                       " failed: ", error.what()),
                   -1);
  } catch (const ::gloo::EnforceNotMet& error) {
    throw Error(cat("gloo: connecting rank ", options.rank, ": ", error.what()));
  }
  return std::make_unique<GlooCommunicator>(options, std::move(context), std::move(device));
}

}  // namespace cohort::detail::gloo_backend
