#include "comm/backend.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <span>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "comm/backends/gloo/element_types.hpp"
#include "comm/backends/gloo/factory.hpp"
#include "comm/backends/gloo/fast_close.hpp"
#include "comm/backends/gloo/legacy_allreduce.hpp"
#include "comm/backends/gloo/sized_messages.hpp"
#include "comm/backends/gloo/sync_pairs.hpp"
#include "comm/kit/buffers.hpp"
#include "comm/kit/fallbacks.hpp"
#include "comm/kit/group_store.hpp"
#include "comm/kit/peers.hpp"
#include "comm/local_mailbox.hpp"
#include "comm/reduce.hpp"
#include "core/config.hpp"
#include "core/fd.hpp"
#include "core/strings.hpp"

namespace cohort::detail::gloo_backend {
namespace {

// One group's connection settings (a split makes a subgroup's from its parent's).
struct Options {
  int rank = 0;
  int size = 1;
  /// Where the ranks of this group publish their addresses: a view no other
  /// group shares.
  std::shared_ptr<Store> store;
  /// The local address peers reach this rank at ("127.0.0.1" on one node).
  std::string address = "127.0.0.1";
  Communicator::Duration timeout{};
  /// Point-to-point messages with a header that states their size, on Gloo's
  /// unbound buffers (false: BackendContext::messages_sized_by_owner).
  bool sized_messages = true;
  /// Collectives (and where sized_messages is false, messages) on the sync
  /// pairs (COHORT_GLOO_SYNC_PAIRS, on unless 0: the same on every rank).
  bool sync_pairs = true;
};

// One full mesh of Gloo pairs, met through cohort's store. Gloo's own
// connectFullMesh (Debian's 2022-05-18 snapshot) publishes a rank's address
// for each of its pairs as one key (136 bytes a pair) that every other rank
// reads whole, and reads the host name of every lower rank one GET at a
// time (for a local rank its TCP pairs never use): (size - 1)² × 136 bytes
// and about 2.5 × size round trips a rank. Here a rank publishes where its
// pairs listen as one address and a 2-byte port per peer, and reads every
// peer's entry with one MULTI_GET: (size - 1) × (128 + 2 × (size - 1))
// bytes and two requests.
class Context final : public ::gloo::rendezvous::Context {
 public:
  using ::gloo::rendezvous::Context::Context;

  void connect_mesh(Store& store, std::shared_ptr<::gloo::transport::Device>& device) {
    auto pairs = device->createContext(rank, size);
    pairs->setTimeout(getTimeout());
    std::string entry;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const ::gloo::transport::tcp::Address listening(pairs->createPair(peer)->address().bytes());
      sockaddr_storage where = listening.getSockaddr();
      const std::uint16_t port = take_port(where);
      if (entry.empty()) entry.assign(reinterpret_cast<const char*>(&where), sizeof(where));
      if (std::memcmp(entry.data(), &where, sizeof(where)) != 0) {
        throw Error(cat("gloo: rank ", rank, "'s pairs listen on different addresses (",
                        listening.str(), " is not the first's): a mesh entry names one"));
      }
      entry.append(reinterpret_cast<const char*>(&port), sizeof(port));
    }
    std::vector<std::string> keys;
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) keys.push_back(std::to_string(peer));
    }
    addresses_.assign(static_cast<std::size_t>(size), {});
    if (!keys.empty()) {
      store.set(std::to_string(rank), entry);
      const std::vector<std::string> entries = store.multi_get(keys, getTimeout());
      for (std::size_t i = 0; i < keys.size(); ++i) {
        const int peer = static_cast<int>(i) < rank ? static_cast<int>(i) : static_cast<int>(i) + 1;
        const ::gloo::transport::tcp::Address address = slot_of(entries[i], peer);
        addresses_[static_cast<std::size_t>(peer)] = address.str();
        pairs->getPair(peer)->connect(address.bytes());
      }
    }
    device_ = device;
    transportContext_ = std::move(pairs);
  }

  /// Where each peer's pair with this rank listens, as Gloo prints it in
  /// errors ("[10.0.0.2]:41234"): helps tell which rank an error is about.
  const std::vector<std::string>& peer_addresses() const noexcept { return addresses_; }

 private:
  // Where `where` keeps its port (network order); nullptr for a family
  // without one.
  static std::uint16_t* port_field(sockaddr_storage& where) {
    if (where.ss_family == AF_INET) return &reinterpret_cast<sockaddr_in&>(where).sin_port;
    if (where.ss_family == AF_INET6) return &reinterpret_cast<sockaddr_in6&>(where).sin6_port;
    return nullptr;
  }

  // The port of `where`, which is left as its address alone: no port, and
  // zeros wherever getsockname() left the rest of the storage undefined.
  static std::uint16_t take_port(sockaddr_storage& where) {
    sockaddr_storage bare{};
    bare.ss_family = where.ss_family;
    if (where.ss_family == AF_INET) {
      reinterpret_cast<sockaddr_in&>(bare).sin_addr =
          reinterpret_cast<const sockaddr_in&>(where).sin_addr;
    } else if (where.ss_family == AF_INET6) {
      const auto& in6 = reinterpret_cast<const sockaddr_in6&>(where);
      reinterpret_cast<sockaddr_in6&>(bare).sin6_addr = in6.sin6_addr;
      reinterpret_cast<sockaddr_in6&>(bare).sin6_scope_id = in6.sin6_scope_id;
    }
    const std::uint16_t* port = port_field(where);
    const std::uint16_t taken = port != nullptr ? *port : 0;
    where = bare;
    return taken;
  }

  // `peer`'s pair with this rank, from `peer`'s entry: its address, then a
  // port for each of its peers in rank order, itself left out.
  ::gloo::transport::tcp::Address slot_of(const std::string& entry, int peer) const {
    const std::size_t slot = static_cast<std::size_t>(rank < peer ? rank : rank - 1);
    const std::size_t at = sizeof(sockaddr_storage) + slot * sizeof(std::uint16_t);
    if (entry.size() != sizeof(sockaddr_storage) + static_cast<std::size_t>(size - 1) * 2) {
      throw Error(cat("gloo: rank ", peer, "'s mesh entry is ", entry.size(),
                      " bytes, not one for a group of ", size,
                      " (another group or program uses the same store keys)"));
    }
    sockaddr_storage where{};
    std::memcpy(&where, entry.data(), sizeof(where));
    if (std::uint16_t* port = port_field(where))
      std::memcpy(port, entry.data() + at, sizeof(*port));
    return ::gloo::transport::tcp::Address(where);
  }

  std::vector<std::string> addresses_;
};

// Gloo's reduction callback, c = a op b, for any element type and op (avg
// sums; the division follows the collective).
std::function<void(void*, const void*, const void*, size_t)> reduction(DataType type, ReduceOp op) {
  return [type, op](void* c, const void* a, const void* b, size_t n) {
    reduce_to(type, op, c, a, b, n);
  };
}

std::unique_ptr<Backend> connect(const Options& options);

// How long a closing rank waits for the others to be done before it closes
// the slow way.
constexpr std::chrono::milliseconds kDoneWait{250};

class GlooBackend final : public Backend, private Channel {
 public:
  using Duration = Backend::Duration;
  GlooBackend(const Options& options, std::shared_ptr<Context> context,
              std::shared_ptr<Context> sync_mesh, std::shared_ptr<Context> loop_mesh,
              std::shared_ptr<::gloo::transport::Device> device,
              std::unique_ptr<FastClose> fast_close, Peers peers)
      : options_(options),
        fast_close_(std::move(fast_close)),
        device_(std::move(device)),
        context_(std::move(context)),
        peers_(std::move(peers)),
        sync_pairs_(sync_mesh),
        legacy_(std::move(sync_mesh), std::move(loop_mesh), 32) {}

  ~GlooBackend() override {
    // Fast close only once every rank is past its last operation: a rank that
    // closes while a peer still reads from it can cost the peer its last
    // message. A peer that does not come soon leaves Gloo's slow close.
    disconnect(broken_.empty() && everyone_done(*options_.store, rank(), size(),
                                                std::min<Duration>(options_.timeout, kDoneWait)));
  }

  int rank() const noexcept override { return options_.rank; }
  int size() const noexcept override { return options_.size; }
  std::string_view name() const noexcept override { return "gloo"; }
  Duration default_timeout() const noexcept override { return options_.timeout; }

  void all_reduce(Buffer data, ReduceOp op, Duration timeout) override {
    guarded("all_reduce", [&] {
      // Past one piece, where the sync pairs serve the group: the kit's ring,
      // which sends 2 (n-1)/n of the data where the legacy ring sends n-1
      // times all of it (on the loop thread's pairs once that passes 384 KiB).
      // (avg as a sum here: the division comes once, below.)
      if (data.bytes() > kMaxSyncBytes && on_sync_pairs(timeout)) {
        return ring_all_reduce(*this, data, op == ReduceOp::avg ? ReduceOp::sum : op, timeout);
      }
      // The legacy algorithms wait on the pairs' timeout: the default one.
      if (data.bytes() <= legacy_max_bytes_ && timeout == options_.timeout) {
        legacy_.run(data, op);
        return;
      }
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
    if (by_ring(data.bytes(), timeout)) {
      if (rank() != root) std::memset(data.data, 0, data.bytes());
      return guarded("broadcast", [&] { ring_sum_bytes(data.data, data.bytes()); });
    }
    if (on_sync_pairs(timeout)) {
      return guarded("broadcast", [&] { tree_broadcast(*this, data, root, timeout); });
    }
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
    if (by_ring_in_pieces(output.bytes(), timeout)) {
      unsigned char* every = zeros_but_mine(input, output.bytes());
      guarded("all_gather", [&] { ring_sum_bytes(every, output.bytes()); });
      return (void)std::memcpy(output.data, every, output.bytes());
    }
    if (on_sync_pairs(timeout)) {
      return guarded("all_gather", [&] { ring_all_gather(*this, input, output, timeout); });
    }
    const Buffer source = detached(input, output);
    guarded("all_gather", [&] {
      ::gloo::AllgatherOptions opts(context_);
      with_element(input.type, [&](auto* typed) {
        using T = std::remove_pointer_t<decltype(typed)>;
        opts.setInput(static_cast<T*>(source.data), source.count);
        opts.setOutput(static_cast<T*>(output.data), output.count);
      });
      opts.setTimeout(timeout);
      ::gloo::allgather(opts);
    });
  }

  void gather(Buffer input, Buffer output, int root, Duration timeout) override {
    const std::size_t total = input.bytes() * static_cast<std::size_t>(size());
    if (by_ring(total, timeout)) {
      unsigned char* every = zeros_but_mine(input, total);
      guarded("gather", [&] { ring_sum_bytes(every, total); });
      if (rank() == root) std::memcpy(output.data, every, total);
      return;
    }
    if (on_sync_pairs(timeout)) {
      return guarded("gather", [&] { direct_gather(*this, input, output, root, timeout); });
    }
    const Buffer source = rank() == root ? detached(input, output) : input;
    guarded("gather", [&] {
      ::gloo::GatherOptions opts(context_);
      with_element(input.type, [&](auto* typed) {
        using T = std::remove_pointer_t<decltype(typed)>;
        opts.setInput(static_cast<T*>(source.data), source.count);
        if (rank() == root) opts.setOutput(static_cast<T*>(output.data), output.count);
      });
      opts.setRoot(root);
      opts.setTimeout(timeout);
      ::gloo::gather(opts);
    });
  }

  void scatter(Buffer input, Buffer output, int root, Duration timeout) override {
    const std::size_t total = output.bytes() * static_cast<std::size_t>(size());
    if (by_ring(total, timeout)) {
      scratch_.assign(total, 0);
      if (rank() == root) std::memcpy(scratch_.data(), input.data, total);
      guarded("scatter", [&] { ring_sum_bytes(scratch_.data(), total); });
      return (void)std::memcpy(output.data, mine(scratch_.data(), output.bytes()), output.bytes());
    }
    if (on_sync_pairs(timeout)) {
      return guarded("scatter", [&] { direct_scatter(*this, input, output, root, timeout); });
    }
    // At the root, an output inside the input is already in place: Gloo gets
    // a scratch output (its copy there would overlap).
    std::vector<unsigned char> scratch;
    Buffer target = output;
    if (rank() == root && overlaps(output, input)) {
      scratch.resize(output.bytes());
      target.data = scratch.data();
    }
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
        opts.setOutput(static_cast<T*>(target.data), target.count);
      });
      opts.setRoot(root);
      opts.setTimeout(timeout);
      ::gloo::scatter(opts);
    });
  }

  void reduce_scatter(Buffer input, Buffer output, ReduceOp op, Duration timeout) override {
    if (by_ring_in_pieces(input.bytes(), timeout)) {
      // A copy: the output may be a slice of the input.
      scratch_.assign(static_cast<unsigned char*>(input.data),
                      static_cast<unsigned char*>(input.data) + input.bytes());
      guarded("reduce_scatter", [&] {
        legacy_.run({scratch_.data(), input.count, input.type}, op);
      });
      std::memcpy(output.data, mine(scratch_.data(), output.bytes()), output.bytes());
      if (op == ReduceOp::avg) finish_average(output.type, output.data, output.count, size());
      return;
    }
    // Gloo has none: the kit's ring, over the pairs' channel slot.
    guarded("reduce_scatter", [&] { ring_reduce_scatter(*this, input, output, op, timeout); });
  }

  void all_to_all(Buffer input, Buffer output, Duration timeout) override {
    // Small: every rank's whole input, a row of the n × n blocks, summed into
    // the matrix; each keeps its column.
    const std::size_t total = input.bytes() * static_cast<std::size_t>(size());
    if (by_ring(total, timeout)) {
      unsigned char* matrix = zeros_but_mine(input, total);
      guarded("all_to_all", [&] { ring_sum_bytes(matrix, total); });
      const std::size_t block = output.bytes() / static_cast<std::size_t>(size());
      for (int from = 0; from < size(); ++from) {
        std::memcpy(
            static_cast<unsigned char*>(output.data) + static_cast<std::size_t>(from) * block,
            matrix + static_cast<std::size_t>(from) * input.bytes() +
                static_cast<std::size_t>(rank()) * block,
            block);
      }
      return;
    }
    if (on_sync_pairs(timeout)) {
      return guarded("all_to_all", [&] { direct_all_to_all(*this, input, output, timeout); });
    }
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

  // Each message says its size first (sized_messages.hpp): a recv of
  // another size raises InvalidArgument, where Gloo's own check would end
  // the process.
  void send(Buffer data, int peer, int tag, Duration timeout) override {
    if (peer == rank()) return mailbox_.post(data, tag);  // no transport pair to oneself
    guarded("send", [&] {
      if (messages_on_sync_pairs(timeout)) return sync_pairs_.send(data.data, data.bytes(), peer);
      const auto started = Clock::now();
      if (!options_.sized_messages) {
        auto message = context_->createUnboundBuffer(data.data, data.bytes());
        message->send(peer, header_slot(tag));
        return wait_sent(*message, peer, started, timeout);
      }
      const std::size_t bytes = data.bytes();
      const std::size_t first = first_piece_bytes(bytes);
      unsigned char header[kMessageHeaderBytes];
      write_message_header(header, bytes);
      auto head = context_->createUnboundBuffer(header, sizeof header);
      auto body = context_->createUnboundBuffer(data.data, bytes);
      head->send(peer, header_slot(tag));
      body->send(peer, first_piece_slot(tag), 0, first);
      if (bytes > first) body->send(peer, rest_slot(tag), first, bytes - first);
      wait_sent(*head, peer, started, timeout);
      wait_sent(*body, peer, started, timeout);
      if (bytes > first) wait_sent(*body, peer, started, timeout);
    });
  }

  void recv(Buffer data, int peer, int tag, Duration timeout) override {
    if (peer == rank()) return mailbox_.take(data, tag, timeout);
    guarded("recv", [&] {
      if (messages_on_sync_pairs(timeout)) return sync_pairs_.recv(data.data, data.bytes(), peer);
      const auto started = Clock::now();
      if (!options_.sized_messages) {
        auto message = context_->createUnboundBuffer(data.data, data.bytes());
        message->recv(peer, header_slot(tag));
        return wait_received(*message, peer, started, timeout);
      }
      const std::size_t bytes = data.bytes();
      // The first piece gets room for the longest there is, whatever this
      // recv's size: a longer one than its room would end the process.
      unsigned char* const room = bytes < kFirstPieceBytes ? first_piece_room() : nullptr;
      unsigned char header[kMessageHeaderBytes] = {};
      auto head = context_->createUnboundBuffer(header, sizeof header);
      auto piece = room ? context_->createUnboundBuffer(room, kFirstPieceBytes)
                        : context_->createUnboundBuffer(data.data, bytes);
      head->recv(peer, header_slot(tag));
      piece->recv(peer, first_piece_slot(tag), 0, kFirstPieceBytes);
      wait_received(*head, peer, started, timeout);
      const std::optional<std::uint64_t> said = read_message_header(header);
      if (!said) {
        throw Error(cat("recv on rank ", rank(), " from rank ", peer, peers_.describe(peer),
                        " with tag ", tag,
                        ": the message does not say a size a buffer can have; the two ranks' "
                        "messages are out of step (or its sender is not cohort's gloo backend): "
                        "make a new communicator"));
      }
      // The rest, taken whole whatever its size, so that the next message
      // comes as sent; posted while the first piece is on its way.
      const std::size_t first = first_piece_bytes(*said);
      std::unique_ptr<unsigned char[]> scratch;
      std::unique_ptr<::gloo::transport::UnboundBuffer> rest;
      if (*said > first) {
        if (*said == bytes) {
          rest = context_->createUnboundBuffer(static_cast<unsigned char*>(data.data) + first,
                                               bytes - first);
        } else {
          scratch = std::make_unique_for_overwrite<unsigned char[]>(*said - first);
          rest = context_->createUnboundBuffer(scratch.get(), *said - first);
        }
        rest->recv(peer, rest_slot(tag));
      }
      wait_received(*piece, peer, started, timeout);
      if (rest) wait_received(*rest, peer, started, timeout);
      if (*said != bytes) {
        throw InvalidArgument(cat("recv from rank ", peer, " with tag ", tag, ": the message has ",
                                  *said, " bytes, the buffer ", bytes));
      }
      if (room && bytes > 0) std::memcpy(data.data, room, bytes);
    });
  }

  std::unique_ptr<Backend> split(int color, int key) override {
    // Each subgroup connects on its own view of the store.
    const std::optional<Subgroup> group =
        plan_split(options_.store, ++splits_, rank(), size(), color, key, options_.timeout);
    if (!group) return nullptr;
    Options sub = options_;
    sub.rank = group->rank;
    sub.size = group->size;
    sub.store = group->store;
    return connect(sub);
  }

 private:
  // Point-to-point messages use slots of their own, apart from collectives':
  // a message's header, first piece and rest (sized_messages.hpp) each one
  // per tag. The kit's algorithms (the Channel) another.
  static std::uint64_t header_slot(int tag) {
    return (std::uint64_t{1} << 56) | static_cast<std::uint32_t>(tag);
  }
  static constexpr std::uint64_t kChannelSlot = std::uint64_t{2} << 56;
  static std::uint64_t first_piece_slot(int tag) {
    return (std::uint64_t{3} << 56) | static_cast<std::uint32_t>(tag);
  }
  static std::uint64_t rest_slot(int tag) {
    return (std::uint64_t{4} << 56) | static_cast<std::uint32_t>(tag);
  }
  // Where this thread receives the first pieces that are longer than the
  // buffer they are for: kept, so that its pages are touched once, not at
  // every message. Per thread, since a communicator's calls come from one
  // thread at a time.
  static unsigned char* first_piece_room() {
    thread_local std::unique_ptr<unsigned char[]> room;
    if (!room) room = std::make_unique_for_overwrite<unsigned char[]>(kFirstPieceBytes);
    return room.get();
  }

  using Clock = std::chrono::steady_clock;
  // What is left of a call's `timeout` since it `started` (Gloo's waits take
  // at least a millisecond).
  static Duration left(Clock::time_point started, Duration timeout) {
    const auto spent = std::chrono::duration_cast<Duration>(Clock::now() - started);
    return std::max(Duration{1}, timeout - spent);
  }
  void wait_sent(::gloo::transport::UnboundBuffer& message, int peer, Clock::time_point started,
                 Duration timeout) {
    if (!message.waitSend(left(started, timeout))) {
      throw Timeout(cat("send to rank ", peer, " timed out after ", timeout.count(), " ms"));
    }
  }
  void wait_received(::gloo::transport::UnboundBuffer& message, int peer, Clock::time_point started,
                     Duration timeout) {
    if (!message.waitRecv(left(started, timeout))) {
      throw Timeout(cat("recv from rank ", peer, " timed out after ", timeout.count(), " ms"));
    }
  }

  // Channel: both directions posted before either is waited for. Gloo's
  // exceptions pass through to the collective's guarded().
  void exchange(const void* send, std::size_t send_bytes, int to, void* recv,
                std::size_t recv_bytes, int from, Duration timeout) override {
    if (on_sync_pairs(timeout))
      return sync_pairs_.exchange(send, send_bytes, to, recv, recv_bytes, from);
    std::unique_ptr<::gloo::transport::UnboundBuffer> out, in;
    if (to >= 0) {
      out = context_->createUnboundBuffer(const_cast<void*>(send), send_bytes);
      out->send(to, kChannelSlot);
    }
    if (from >= 0) {
      in = context_->createUnboundBuffer(recv, recv_bytes);
      in->recv(from, kChannelSlot);
    }
    if (in && !in->waitRecv(timeout)) {
      throw Timeout(cat("receiving from rank ", from, " timed out after ", timeout.count(), " ms"));
    }
    if (out && !out->waitSend(timeout)) {
      throw Timeout(cat("sending to rank ", to, " timed out after ", timeout.count(), " ms"));
    }
  }

  // Collectives run the kit's algorithms on the sync pairs (sync_pairs.hpp),
  // never through the loop thread: reduce_scatter, all_gather, broadcast,
  // gather, scatter, all_to_all, and all_reduce past a piece, in place of
  // Gloo's and the legacy rings' sums; their order is the collectives',
  // the same on every rank. With the group's own timeout only, which the
  // pairs' sockets keep.
  bool on_sync_pairs(Duration timeout) const {
    return options_.sync_pairs && timeout == options_.timeout;
  }
  // Point-to-point messages too, in groups whose owner sizes and orders every
  // message (hier's leaders, rails and flat group); a user's go through
  // Gloo's unbound buffers, in whatever order the user sends them.
  bool messages_on_sync_pairs(Duration timeout) const {
    return !options_.sized_messages && on_sync_pairs(timeout);
  }

  // Small broadcasts, all_gathers, gathers, scatters, reduce_scatters and
  // all_to_alls as one all_reduce on the legacy sync-mode rings (legacy_allreduce.hpp),
  // where the calling thread reads and writes the sockets itself: tens of
  // microseconds, where Gloo's new-style operations, and the point-to-point
  // messages of the kit's reduce_scatter ring, wait on its loop thread for
  // scheduler ticks (about 4 ms) on few cores. Only up to the sync rings'
  // size, and while each rank sends at most kMaxSyncRingSend in all (the
  // ring passes every rank's whole buffer n − 1 times).
  bool by_ring(std::size_t bytes, Duration timeout) const {
    return by_ring_in_pieces(bytes, timeout) && bytes <= kMaxSyncBytes;
  }
  // all_gather and reduce_scatter also past the sync rings' size, up to
  // kMaxRingSumBytes (sync_ring.hpp), the ring in pieces: their Gloo
  // counterparts wait on the loop thread at every step (4 ranks, 64 KiB:
  // 3.2 ms against 0.6 ms in pieces). Not broadcast, gather and scatter,
  // whose Gloo operations send each peer its part at once and were as fast
  // or faster from 64 KiB. Measured on the namespace cluster
  // (docs/communicator.md, "How the gloo backend avoids Gloo's traps").
  // Neither where the sync pairs take these collectives: there each block
  // crosses once, where the ring passes every rank's whole buffer on.
  bool by_ring_in_pieces(std::size_t bytes, Duration timeout) const {
    return size() > 1 && !on_sync_pairs(timeout) &&
           bytes <= std::min(legacy_max_bytes_, kMaxRingSumBytes) && timeout == options_.timeout &&
           bytes * static_cast<std::size_t>(size() - 1) <= kMaxSyncRingSend;
  }
  // A sum of one rank's bytes and the others' zeros, as integers: every bit
  // arrives as it was sent.
  void ring_sum_bytes(void* data, std::size_t bytes) {
    legacy_.run(as_integers(data, bytes), ReduceOp::sum);
  }
  // Scratch of `total` bytes, zero but for this rank's block, `input`.
  unsigned char* zeros_but_mine(Buffer input, std::size_t total) {
    scratch_.assign(total, 0);
    std::memcpy(mine(scratch_.data(), input.bytes()), input.data, input.bytes());
    return scratch_.data();
  }
  unsigned char* mine(unsigned char* blocks, std::size_t block) const {
    return blocks + static_cast<std::size_t>(rank()) * block;
  }

  // `input`, or a copy of it when it lies inside `output` (in-place use):
  // Gloo copies input to output with memcpy, which must not overlap.
  Buffer detached(Buffer input, Buffer output) {
    if (!overlaps(input, output)) return input;
    scratch_.assign(static_cast<unsigned char*>(input.data),
                    static_cast<unsigned char*>(input.data) + input.bytes());
    return {scratch_.data(), input.count, input.type};
  }

  // Gloo's exceptions become cohort's, naming the peer where it is known.
  // After a transport error the group is broken: this rank closes its
  // connections, so that the peers still waiting on it fail at once too.
  // Gloo writes with writev, and a peer that closed its end raises SIGPIPE
  // in the writing thread, which ends the process; this thread's writes
  // (the pairs in sync mode) hold it back, and a transport error takes the
  // one they raised.
  template <class Body>
  void guarded(const char* collective, Body&& body) {
    if (!broken_.empty()) throw PeerLost(cat(collective, ": ", broken_), lost_rank_);
    SigpipeHeld sigpipe;
    try {
      body();
    } catch (const ::gloo::IoException& error) {
      sigpipe.failed(EPIPE);
      fail(collective, error.what());
    } catch (const ::gloo::Exception& error) {
      throw Error(cat(collective, " on rank ", rank(), ": gloo: ", error.what()));
    } catch (const ::gloo::EnforceNotMet& error) {
      throw Error(cat(collective, " on rank ", rank(), ": gloo: ", error.what()));
    }
  }

  [[noreturn]] void fail(const char* collective, const std::string& gloo_error) {
    // "Timed out waiting ... for recv operation", "Read timeout [addr]:port".
    std::string lower = gloo_error;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const bool timed_out =
        lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos;
    // The first rank to pin an error on a peer records it, so that the ranks
    // that then see only the cascade (or a timeout) name the rank that failed.
    const int lost = find_lost_peer(*options_.store, peers_, gloo_error, timed_out);
    const std::string where = cat(collective, " on rank ", rank(), " of ", size());
    if (lost < 0 && timed_out) {
      throw Timeout(cat(where, " timed out (gloo: ", gloo_error,
                        "); no peer is known to have failed: one may be stuck, or slow (raise "
                        "COHORT_TIMEOUT)"));
    }
    lost_rank_ = lost;
    broken_ = lost >= 0 ? cat("rank ", lost, peers_.describe(lost), " failed or left")
                        : std::string("a peer failed or left");
    broken_ += cat(" (gloo: ", gloo_error, ")");
    disconnect(true);  // the peers waiting on this rank fail at once too
    throw PeerLost(cat(where, ": ", broken_), lost);
  }

  // Closes every connection, without Gloo's close waits when `fast`.
  void disconnect(bool fast) noexcept {
    if (!context_) return;
    if (fast) fast_close_->start();
    sync_pairs_.release();
    legacy_.release();
    context_.reset();
    device_.reset();
  }

  Options options_;
  std::unique_ptr<FastClose> fast_close_;  // outlives the device's loop thread
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<Context> context_;
  Peers peers_;
  SyncPairs sync_pairs_;
  LegacyAllreduce legacy_;
  // All-reduces up to this size take the legacy algorithms (the same on
  // every rank, as the environment is).
  std::size_t legacy_max_bytes_ =
      std::min(LegacyAllreduce::kMaxBytes,
               bytes_from_env("COHORT_GLOO_LEGACY_MAX_BYTES", LegacyAllreduce::kMaxBytes));
  std::vector<unsigned char> scratch_;
  int splits_ = 0;
  std::string broken_;
  int lost_rank_ = -1;
  LocalMailbox mailbox_;
};

// One full mesh of Gloo pairs over `device`, its addresses exchanged under
// `name` in the group's store.
std::shared_ptr<Context> connect_mesh(const Options& options,
                                      std::shared_ptr<::gloo::transport::Device>& device,
                                      const std::string& name, std::vector<std::string>* peers) {
  auto context = std::make_shared<Context>(options.rank, options.size);
  context->setTimeout(options.timeout);  // before connecting: pairs keep it
  PrefixStore store(name, options.store);
  try {
    context->connect_mesh(store, device);
  } catch (const ::gloo::IoException& error) {
    throw PeerLost(cat("gloo: connecting rank ", options.rank, " of ", options.size,
                       " failed: ", error.what()),
                   -1);
  } catch (const ::gloo::EnforceNotMet& error) {
    throw Error(cat("gloo: connecting rank ", options.rank, ": ", error.what()));
  }
  if (peers != nullptr) *peers = context->peer_addresses();
  return context;
}

std::unique_ptr<Backend> connect(const Options& options) {
  ::gloo::transport::tcp::attr attr;
  attr.hostname = options.address;
  attr.ai_family = AF_INET;
  std::shared_ptr<::gloo::transport::Device> device;
  try {
    // Gloo's loop thread, started here, keeps this thread's signal mask: it
    // runs with SIGPIPE blocked, so that its write to a peer that closed
    // its end fails with EPIPE instead of ending the process (a rank that
    // gave up on a call closes its connections: 4 of 30 runs of
    // LentBuffers/gloo_world7 beside two busy loops died of SIGPIPE,
    // 2026-12-07).
    const SigpipeHeld blocked_in_gloos_thread;
    device = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& error) {
    throw Error(cat("gloo: no TCP device on ", options.address, ": ", error.what(),
                    " (set COHORT_IFNAME to an interface that reaches the other ranks)"));
  }
  auto fast_close = std::make_unique<FastClose>(device);
  Peers::publish(*options.store, options.rank);
  std::vector<std::string> addresses;
  auto context = connect_mesh(options, device, "mesh", &addresses);
  // The legacy algorithms get meshes of their own (see legacy_allreduce.hpp).
  auto sync_mesh = connect_mesh(options, device, "sync", nullptr);
  for (int peer = 0; peer < options.size; ++peer) {
    if (peer != options.rank) sync_mesh->getPair(peer)->setSync(true, false);
  }
  auto loop_mesh = connect_mesh(options, device, "loop", nullptr);
  Peers peers(*options.store, options.rank, std::move(addresses), options.timeout);
  return std::make_unique<GlooBackend>(options, std::move(context), std::move(sync_mesh),
                                       std::move(loop_mesh), std::move(device),
                                       std::move(fast_close), std::move(peers));
}

}  // namespace

std::string unviable_because(const BackendContext& context) {
  return context.store ? std::string() : "it needs the job's store to connect the ranks";
}

std::unique_ptr<Communicator> create(const BackendContext& context) {
  Options options;
  options.rank = context.info->rank.value;
  options.size = context.info->world_size.value;
  options.store = std::make_shared<PrefixStore>("comm/gloo", context.store);
  options.address = context.address;
  options.timeout = context.timeout;
  options.sized_messages = !context.messages_sized_by_owner;
  options.sync_pairs = bytes_from_env("COHORT_GLOO_SYNC_PAIRS", 1) != 0;
  return std::make_unique<Communicator>(connect(options));
}

}  // namespace cohort::detail::gloo_backend
