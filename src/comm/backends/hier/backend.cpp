#include "comm/backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "comm/backends/gloo/sync_ring.hpp"
#include "comm/backends/hier/factory.hpp"
#include "comm/backends/hier/layout.hpp"
#include "comm/kit/buffers.hpp"
#include "comm/kit/communicator_backend.hpp"
#include "comm/kit/group_store.hpp"
#include "comm/kit/host_identity.hpp"
#include "comm/reduce.hpp"
#include "comm/registry.hpp"
#include "core/strings.hpp"

namespace cohort::detail::hier_backend {
namespace {

using Duration = Backend::Duration;

// The tag of hier's own messages between the leaders (gather, scatter, and
// all_gather and reduce_scatter on hosts of consecutive ranks).
constexpr int kHostsTag = 0;

// From these sizes (all_gather's output, reduce_scatter's input), all_gather
// and reduce_scatter on hosts of consecutive ranks go in place
// (all_gather_in_place, reduce_scatter_in_place). Below them the leaders'
// point-to-point messages wait on gloo's loop thread, where the leaders'
// or the rails' collectives take gloo's small-message rings. Without rails
// (hosts of different sizes) from 64 KiB: below it the padded way was
// faster on hosts of 1, 2, 1 and 2, 1, 2, 1 ranks (reduce_scatter on 1, 2,
// 1 at 4-16 KiB: 0.17-0.19 ms against 0.88-0.93 ms), from it the way in
// place on those and 2, 1. On rails from 1 MiB: the rails' way copies every block
// once more on every rank (from [local index][host] to its rank's place),
// which from there costs more than their several connections between
// hosts save (2 and 4 hosts of 2 ranks, 1-16 MiB: in place 1.1-3.9 times
// as fast). Measured on the namespace cluster (docs/communicator.md).
constexpr std::size_t kInPlaceBytes = std::size_t{64} << 10;
constexpr std::size_t kInPlaceOverRailsBytes = std::size_t{1} << 20;
// In jobs of at most kMaxFlatRanks ranks, gather and scatter go over the
// flat group of every rank (flat(), connected by the first of them), as
// the gloo backend's: each block crosses once, between its rank and the
// root, on the flat group's sync pairs. Since gloo's collectives run there
// (2026-12-08), its direct gather and scatter were faster than the leaders'
// way in 40 of 54 cells from 16 KiB to 4 MiB on 2 × 2, 4 × 2 and 1 + 2 + 1
// namespace nodes (`bench/compare_nodes`, 01:33 UTC: the leaders' way at
// 0.08-0.94x of flat gloo's speed in 25 of 27 gather cells, 0.15-0.95x in
// 15 of 27 scatter cells, 1.0-1.3x in the others). Until then the leaders' way,
// which copies each block into its leader first, was as fast or faster
// below blocks of 512 KiB (measured on the namespace cluster,
// docs/communicator.md), where Gloo's own gather and scatter waited on its
// loop thread. A flat group costs each rank 3 × (N - 1) ports at most
// (189).
constexpr int kMaxFlatRanks = 64;
// What a leader may send in all for gather and scatter to go round the
// leaders' sync ring in pieces (gather_ring).
constexpr std::size_t kMaxGatherRingSend = std::size_t{64} << 10;

// Sums for avg across the levels; the division happens once, at the end.
ReduceOp inner_op(ReduceOp op) {
  return op == ReduceOp::avg ? ReduceOp::sum : op;
}

// The ranks of one group: who they are and how they connect.
struct Groups {
  std::unique_ptr<Communicator> host;     // this host's ranks (shm; self when alone)
  std::unique_ptr<Communicator> leaders;  // the hosts' first ranks (gloo); null elsewhere
  // Whether all_reduce runs on rails: every host runs as many ranks (and
  // COHORT_HIER_RAILS at rank 0 is not 0). A rail: the ranks of one local
  // index on every host (gloo); null for the leaders, whose rail is `leaders`.
  bool rails = false;
  std::unique_ptr<Communicator> rail;
};

// `sized_by_owner`: the group carries hier's own messages only, whose sizes
// and order both sides know (BackendContext::messages_sized_by_owner).
std::unique_ptr<Communicator> connect_group(const BackendContext& parent, const std::string& name,
                                            int rank, int size, std::string_view backend,
                                            std::vector<std::string> hosts, int machine_ranks = 0,
                                            bool sized_by_owner = false);

// Each host's first rank when every host's ranks are one stretch of the
// ranks (rank r is its host's first plus its local index); else empty.
std::vector<int> contiguous_first_ranks(const HostLayout& layout) {
  std::vector<int> first;
  int next = 0;
  for (int size : layout.local_size) {
    first.push_back(next);
    next += size;
  }
  for (std::size_t r = 0; r < layout.node_of.size(); ++r) {
    const auto node = static_cast<std::size_t>(layout.node_of[r]);
    const int rank = first[node] + layout.local_index[r];
    if (static_cast<std::size_t>(rank) != r) return {};
  }
  return first;
}

class HierBackend final : public Backend {
 public:
  HierBackend(int rank, std::vector<std::string> hosts, HostLayout layout, Groups groups,
              std::shared_ptr<Store> store, std::string address, Duration timeout)
      : rank_(rank),
        hosts_(std::move(hosts)),
        layout_(std::move(layout)),
        groups_(std::move(groups)),
        store_(std::move(store)),
        address_(std::move(address)),
        timeout_(timeout),
        widest_(static_cast<std::size_t>(
            *std::max_element(layout_.local_size.begin(), layout_.local_size.end()))),
        first_ranks_(contiguous_first_ranks(layout_)) {}

  ~HierBackend() override {
    // Each pair group waits at its end for its other rank to be done with
    // it: every rank ends them in the order of their peers' ranks, so that
    // no ring of ranks waits on each other.
    for (auto& [peer, group] : pairs_)
      group.reset();
  }

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return static_cast<int>(layout_.node_of.size()); }
  std::string_view name() const noexcept override { return "hier"; }
  Duration default_timeout() const noexcept override { return timeout_; }

  // Memory every rank of this host maps (shm's Communicator::allocate), so
  // that the steps inside each host work on it in place.
  std::shared_ptr<void> allocate(std::size_t bytes, Duration timeout) override {
    return groups_.host->allocate(bytes, timeout);
  }

  // With rails (every host runs L ranks): reduce-scatter inside each host
  // (local rank i holds slice i of the host's sum, in place in its own
  // buffer), all-reduce of slice i across hosts by the local ranks i, every
  // rail in parallel, all-gather inside each host, in place. The last
  // count % L elements, and every element when hosts differ in size, go the
  // leaders' way: reduce to each host's leader, all-reduce across leaders,
  // broadcast inside each host.
  void all_reduce(Buffer data, ReduceOp op, Duration timeout) override {
    const ReduceOp sum_or_op = inner_op(op);
    Buffer rest = data;
    if (Communicator* rail = this->rail()) {
      const auto local = static_cast<std::size_t>(groups_.host->size());
      const std::size_t slice = data.count / local;
      if (slice > 0) {
        Buffer whole = data;
        whole.count = slice * local;
        Buffer mine{static_cast<unsigned char*>(data.data) +
                        static_cast<std::size_t>(groups_.host->rank()) * slice * size_of(data.type),
                    slice, data.type};
        groups_.host->reduce_scatter(whole, mine, sum_or_op, timeout);
        rail->all_reduce(mine, sum_or_op, timeout);
        groups_.host->all_gather(mine, whole, timeout);
        rest.data = static_cast<unsigned char*>(data.data) + whole.bytes();
        rest.count = data.count - whole.count;
      }
    }
    if (rest.count > 0) {
      groups_.host->reduce(rest, sum_or_op, 0, timeout);
      if (groups_.leaders) groups_.leaders->all_reduce(rest, sum_or_op, timeout);
      groups_.host->broadcast(rest, 0, timeout);
    }
    if (op == ReduceOp::avg) finish_average(data.type, data.data, data.count, size());
  }

  // The root's host first (to its leader), then across leaders, then the others' hosts.
  void broadcast(Buffer data, int root, Duration timeout) override {
    const int root_node = node_of(root);
    if (my_node() == root_node) groups_.host->broadcast(data, local_index(root), timeout);
    if (groups_.leaders) groups_.leaders->broadcast(data, root_node, timeout);
    if (my_node() != root_node) groups_.host->broadcast(data, 0, timeout);
  }

  // Leaders reduce a copy (their own data must stay as it was unless they
  // are the root); the result goes from the root host's leader to the root,
  // by a broadcast inside that host: the host groups carry no point-to-point
  // messages of hier's own, which could meet the user's (send and recv).
  void reduce(Buffer data, ReduceOp op, int root, Duration timeout) override {
    const bool leader = groups_.leaders != nullptr;
    Buffer work = data;
    if (leader) {
      scratch_.assign(static_cast<unsigned char*>(data.data),
                      static_cast<unsigned char*>(data.data) + data.bytes());
      work.data = scratch_.data();
    }
    groups_.host->reduce(work, inner_op(op), 0, timeout);
    if (leader) groups_.leaders->reduce(work, inner_op(op), node_of(root), timeout);
    if (my_node() == node_of(root)) {
      if (local_index(root) == 0) {  // the root leads its host: it has the sum
        if (rank_ == root) std::memcpy(data.data, work.data, data.bytes());
      } else {
        Buffer result = work;  // the leader's sum; the root's own data
        if (!leader && rank_ != root) result.data = scratch(data.bytes());
        groups_.host->broadcast(result, 0, timeout);
      }
    }
    if (rank_ == root && op == ReduceOp::avg) {
      finish_average(data.type, data.data, data.count, size());
    }
  }

  void barrier(Duration timeout) override {
    groups_.host->barrier(timeout);
    if (groups_.leaders) groups_.leaders->barrier(timeout);
    groups_.host->barrier(timeout);
  }

  // Hosts of consecutive ranks, from kInPlaceBytes (kInPlaceOverRailsBytes
  // on rails): in place. Else, with rails: each rail gathers its local
  // index's blocks across hosts, then each host gathers its rails' results,
  // and every block goes to its rank's place. Else the leaders' way: each
  // host gathers to its leader, the leaders all-gather their hosts' blocks
  // (padded to the widest host), each host broadcasts them.
  void all_gather(Buffer input, Buffer output, Duration timeout) override {
    Communicator* rail = this->rail();
    const std::size_t in_place_from = rail == nullptr ? kInPlaceBytes : kInPlaceOverRailsBytes;
    if (rail == nullptr && !first_ranks_.empty() && leaders_ring(output.bytes())) {
      return all_gather_by_sum(input, output, timeout);
    }
    if (!first_ranks_.empty() && output.bytes() >= in_place_from) {
      return all_gather_in_place(input, output, timeout);
    }
    if (rail == nullptr) {
      const Padded padded = gather_to_leader(input, timeout);
      Buffer every = padded.across;
      if (groups_.leaders) groups_.leaders->all_gather(padded.host, every, timeout);
      groups_.host->broadcast(every, 0, timeout);
      return unpad(every, output);
    }
    const std::size_t block = input.bytes();
    const auto nodes = static_cast<std::size_t>(layout_.nodes);
    const auto local = static_cast<std::size_t>(groups_.host->size());
    scratch_.resize(block * nodes * (1 + local));
    Buffer across{scratch_.data(), input.count * nodes, input.type};
    rail->all_gather(input, across, timeout);  // [host]: that host's rank of my local index
    Buffer here{scratch_.data() + block * nodes, input.count * nodes * local, input.type};
    groups_.host->all_gather(across, here, timeout);  // [local index][host]
    for (int r = 0; r < size(); ++r) {
      std::memcpy(static_cast<unsigned char*>(output.data) + static_cast<std::size_t>(r) * block,
                  static_cast<unsigned char*>(here.data) + place_in_rails(r) * block, block);
    }
  }
  // Hosts of consecutive ranks: small, round the leaders' sync ring
  // (gather_by_sum); with the root leading its own: in place
  // (gather_in_place). Else, with rails: each host gathers to its rank of
  // the root's local index, whose rail gathers the hosts' blocks at the
  // root. Else the leaders' way (each host's blocks alone, unpadded), and
  // the root's host broadcasts what its leader gathered when the root is
  // not the leader.
  void gather(Buffer input, Buffer output, int root, Duration timeout) override {
    if (flat_between_ranks()) return flat().gather(input, output, root, timeout);
    if (!first_ranks_.empty() && gather_ring(input.bytes() * static_cast<std::size_t>(size()))) {
      return gather_by_sum(input, output, root, timeout);
    }
    const int via = local_index(root);
    if (via == 0 && !first_ranks_.empty()) return gather_in_place(input, output, root, timeout);
    if (Communicator* rail = this->rail()) {
      const std::size_t local = static_cast<std::size_t>(groups_.host->size());
      Buffer host{scratch(input.bytes() * local * (1 + nodes())), input.count * local, input.type};
      groups_.host->gather(input, host, via, timeout);
      if (local_index(rank_) != via) return;
      Buffer every{static_cast<unsigned char*>(host.data) + host.bytes(), host.count * nodes(),
                   input.type};
      rail->gather(host, every, node_of(root), timeout);
      if (rank_ == root) unpad(every, output);  // uniform hosts: no padding
      return;
    }
    const Padded padded = gather_to_leader(input, timeout);
    Buffer every = padded.across;
    if (groups_.leaders) gather_hosts(padded.host, every, node_of(root), timeout);
    if (my_node() != node_of(root)) return;
    if (via != 0) groups_.host->broadcast(every, 0, timeout);
    if (rank_ == root) unpad(every, output);
  }
  // The reverse of gather: small round the leaders' sync ring
  // (scatter_by_sum) and in place where gather is; else the root's rail
  // scatters each host its blocks, then each host scatters from its rank of
  // the root's local index. Else the leaders' way: the root's leader gets
  // the input (a broadcast inside that host when the root is not the
  // leader), sends each host's blocks alone to its leader, and each leader
  // scatters inside its host.
  void scatter(Buffer input, Buffer output, int root, Duration timeout) override {
    if (flat_between_ranks()) return flat().scatter(input, output, root, timeout);
    if (!first_ranks_.empty() && gather_ring(output.bytes() * static_cast<std::size_t>(size()))) {
      return scatter_by_sum(input, output, root, timeout);
    }
    const int via = local_index(root);
    if (via == 0 && !first_ranks_.empty()) return scatter_in_place(input, output, root, timeout);
    const std::size_t block = output.bytes();
    if (Communicator* rail = this->rail()) {
      const std::size_t local = static_cast<std::size_t>(groups_.host->size());
      Buffer host{scratch(block * local * (1 + nodes())), output.count * local, output.type};
      if (local_index(rank_) == via) {
        Buffer every{static_cast<unsigned char*>(host.data) + host.bytes(), host.count * nodes(),
                     output.type};
        if (rank_ == root) pad(input, every, block);
        rail->scatter(every, host, node_of(root), timeout);
      }
      return groups_.host->scatter(host, output, via, timeout);
    }
    const std::size_t width = widest_;
    const std::size_t whole = block * static_cast<std::size_t>(size());
    unsigned char* base = scratch(block * width * (1 + nodes()) + whole);
    Buffer mine{base, output.count * width, output.type};
    Buffer every{base + mine.bytes(), mine.count * nodes(), output.type};
    if (my_node() == node_of(root)) {
      Buffer source = input;
      if (via != 0) {
        if (rank_ != root) {
          source = {base + mine.bytes() + every.bytes(),
                    output.count * static_cast<std::size_t>(size()), output.type};
        }
        groups_.host->broadcast(source, via, timeout);
      }
      if (groups_.leaders) pad(source, every, block);
    }
    if (groups_.leaders) scatter_hosts(every, mine, node_of(root), timeout);
    mine.count = output.count * static_cast<std::size_t>(groups_.host->size());
    groups_.host->scatter(mine, output, 0, timeout);
  }
  // With rails: the input's blocks sorted by (local index, host); inside
  // each host, local rank i gets its host's sum of the blocks of local index
  // i (one per host); then rail i reduce-scatters those across hosts. Else,
  // hosts of consecutive ranks, from kInPlaceBytes: reduce_scatter_in_place.
  // Else the leaders' way: the blocks sorted by host (each host's padded to the
  // widest), reduced to each host's leader, reduce-scattered across the
  // leaders (each gets its host's blocks), scattered inside each host.
  void reduce_scatter(Buffer input, Buffer output, ReduceOp op, Duration timeout) override {
    const ReduceOp sum_or_op = inner_op(op);
    Communicator* rail = this->rail();
    if (rail == nullptr && !first_ranks_.empty() && leaders_ring(input.bytes())) {
      return reduce_scatter_by_all_reduce(input, output, op, timeout);
    }
    if (rail == nullptr && !first_ranks_.empty() && input.bytes() >= kInPlaceBytes) {
      return reduce_scatter_in_place(input, output, op, timeout);
    }
    if (rail == nullptr) {
      const std::size_t block = output.bytes();
      const std::size_t width = widest_;
      unsigned char* base = scratch(block * width * (nodes() + 1));
      Buffer sorted{base, output.count * width * nodes(), output.type};
      std::memset(base, 0, sorted.bytes());  // the padding: reduced, then dropped
      pad(input, sorted, block);
      groups_.host->reduce(sorted, sum_or_op, 0, timeout);
      Buffer mine{base + sorted.bytes(), output.count * width, output.type};
      if (groups_.leaders) groups_.leaders->reduce_scatter(sorted, mine, sum_or_op, timeout);
      mine.count = output.count * static_cast<std::size_t>(groups_.host->size());
      groups_.host->scatter(mine, output, 0, timeout);
      if (op == ReduceOp::avg) finish_average(output.type, output.data, output.count, size());
      return;
    }
    const std::size_t block = output.bytes();
    const auto nodes = static_cast<std::size_t>(layout_.nodes);
    const auto local = static_cast<std::size_t>(groups_.host->size());
    scratch_.resize(block * nodes * (local + 1));
    for (int r = 0; r < size(); ++r) {
      std::memcpy(
          scratch_.data() + place_in_rails(r) * block,
          static_cast<const unsigned char*>(input.data) + static_cast<std::size_t>(r) * block,
          block);
    }
    Buffer sorted{scratch_.data(), output.count * nodes * local, output.type};
    Buffer mine{scratch_.data() + block * nodes * local, output.count * nodes, output.type};
    groups_.host->reduce_scatter(sorted, mine, sum_or_op, timeout);
    rail->reduce_scatter(mine, output, sum_or_op, timeout);
    if (op == ReduceOp::avg) finish_average(output.type, output.data, output.count, size());
  }
  // all_to_all moves every block between every pair of ranks: through the
  // leaders it would cross the hosts' links as often, with two more copies.
  void all_to_all(Buffer input, Buffer output, Duration timeout) override {
    flat().all_to_all(input, output, timeout);
  }
  // A peer on this host through the host group (shm), one elsewhere through
  // a group of the two of them: each pair of ranks always meets on the same one.
  void send(Buffer data, int peer, int tag, Duration timeout) override {
    if (node_of(peer) == my_node())
      return groups_.host->send(data, local_index(peer), tag, timeout);
    across(peer, [&](Communicator& pair, int other) { pair.send(data, other, tag, timeout); });
  }
  void recv(Buffer data, int peer, int tag, Duration timeout) override {
    if (node_of(peer) == my_node())
      return groups_.host->recv(data, local_index(peer), tag, timeout);
    across(peer, [&](Communicator& pair, int other) { pair.recv(data, other, tag, timeout); });
  }

  // The subgroup gets whatever backend suits its own ranks and hosts.
  std::unique_ptr<Backend> split(int color, int key) override {
    const std::optional<Subgroup> subgroup =
        plan_split(store_, ++splits_, rank_, size(), color, key, timeout_);
    if (!subgroup) return nullptr;
    LaunchInfo info;
    info.rank.value = subgroup->rank;
    info.world_size.value = subgroup->size;
    BackendContext context;
    context.info = &info;
    context.timeout = timeout_;
    context.store = subgroup->store;
    context.address = address_;
    return std::make_unique<CommunicatorBackend>(create_communicator(context, ""));
  }

 private:
  // Groups connected when first needed, not at the start: a gloo group
  // listens on a port and holds a connection for each pair of its ranks
  // (three meshes), so one of every rank would cost each rank 3 × (N - 1)
  // ports at every start (docs/rendezvous.md). A rank waits in a pair's
  // connection no longer than its send would wait for the receive.
  BackendContext parent() const {
    BackendContext context;
    context.timeout = timeout_;
    context.store = store_;
    context.address = address_;
    return context;
  }
  // Every rank: all_to_all is collective, so every rank connects it at once.
  Communicator& flat() {
    std::lock_guard<std::mutex> lock(lazy_mutex_);
    if (!flat_) flat_ = connect_group(parent(), "flat", rank_, size(), "gloo", hosts_, 0, true);
    return *flat_;
  }
  // `peer` and this rank, on another host, in a group of two that both
  // connect at their first send or receive to each other. Errors name
  // `peer` by its rank in the job, not in the pair.
  template <typename Operation>
  void across(int peer, Operation operation) {
    Communicator& pair = pair_with(peer);
    try {
      operation(pair, rank_ < peer ? 1 : 0);
    } catch (const PeerLost& lost) {
      throw PeerLost(cat("hier: rank ", peer, " of ", size(), " (on ", host_of(peer),
                         "), met through a group of the two of us: ", lost.what()),
                     peer);
    }
  }
  Communicator& pair_with(int peer) {
    std::lock_guard<std::mutex> lock(lazy_mutex_);
    std::unique_ptr<Communicator>& group = pairs_[peer];
    if (group) return *group;
    const int low = std::min(rank_, peer);
    const int high = std::max(rank_, peer);
    try {
      group = connect_group(
          parent(), cat("pair/", low, "/", high), rank_ == low ? 0 : 1, 2, "gloo",
          {hosts_[static_cast<std::size_t>(low)], hosts_[static_cast<std::size_t>(high)]});
    } catch (const Timeout& timeout) {
      throw Timeout(cat("hier: rank ", peer, " of ", size(), " (on ", host_of(peer),
                        ") did not come within ", timeout_.count(), " ms to meet rank ", rank_,
                        " for their first message (it may have ended before they ever "
                        "talked, or wait on another rank first): ",
                        timeout.what()));
    }
    return *group;
  }
  std::string host_of(int rank) const {
    return host_name_of(hosts_[static_cast<std::size_t>(rank)]);
  }

  // The leaders' way for hosts of different sizes: each host's blocks in
  // local order, padded to the widest host (`host`, at its leader), and room
  // for every host's (`across`, [host][local index]).
  struct Padded {
    Buffer host;
    Buffer across;
  };
  Padded gather_to_leader(Buffer input, Duration timeout) {
    const std::size_t block = input.bytes();
    unsigned char* base = scratch(block * widest_ * (1 + nodes()));
    const auto local = static_cast<std::size_t>(groups_.host->size());
    groups_.host->gather(input, {base, input.count * local, input.type}, 0, timeout);
    std::memset(base + block * local, 0, block * (widest_ - local));  // sent, never read
    Buffer host{base, input.count * widest_, input.type};
    return {host, {base + host.bytes(), host.count * nodes(), input.type}};
  }
  // Hosts of consecutive ranks, the root leading its own: each host's
  // blocks are one stretch of the root's buffer, in rank order. Each host
  // gathers to its leader (the root's host into the root's output in place),
  // and the root takes each other host's stretch from its leader straight
  // into its output: no padding, and no copy but the host gathers'.
  void gather_in_place(Buffer input, Buffer output, int root, Duration timeout) {
    const int root_node = node_of(root);
    const std::size_t local = static_cast<std::size_t>(groups_.host->size());
    Buffer host = rank_ == root
                      ? stretch(output, my_node(), input.count)
                      : Buffer{scratch(input.bytes() * local), input.count * local, input.type};
    groups_.host->gather(input, host, 0, timeout);
    if (!groups_.leaders) return;
    // Hosts of one size: the stretches are equal, and the leaders' own
    // gather takes them all at once where the messages below come one
    // after another (2 and 4 hosts × 2 ranks, 128 KiB to 2 MiB: 0.09-1.46
    // ms against 0.15-1.95 ms). Not so scatter: Gloo's own was slower there.
    if (layout_.uniform()) return groups_.leaders->gather(host, output, root_node, timeout);
    if (my_node() != root_node) {
      groups_.leaders->send(host, root_node, kHostsTag, timeout);
      return;
    }
    for (int node = 0; node < layout_.nodes; ++node) {
      if (node != root_node) {
        groups_.leaders->recv(stretch(output, node, input.count), node, kHostsTag, timeout);
      }
    }
  }
  // Hosts of consecutive ranks: each host gathers its ranks' blocks into its
  // own stretch of the output, the leaders pass the hosts' stretches round
  // their ring, and each leader hands its host the other hosts' stretches.
  // Nothing is padded or moved between layouts: a host of 1 rank beside one
  // of 8 sends 1 block and receives 8, where the padded way sends 8 and
  // receives 16.
  void all_gather_in_place(Buffer input, Buffer output, Duration timeout) {
    const Buffer mine = stretch(output, my_node(), input.count);
    groups_.host->all_gather(input, mine, timeout);  // in place when the input is its slice
    if (groups_.leaders) {
      for (int step = 0; step + 1 < layout_.nodes; ++step) {
        ring_step(stretch(output, ring_node(-step), input.count),
                  stretch(output, ring_node(-step - 1), input.count), timeout);
      }
    }
    if (groups_.host->size() == 1) return;
    // The other hosts' stretches: those of the ranks before this host's, and after.
    const std::size_t before =
        static_cast<std::size_t>(first_ranks_[static_cast<std::size_t>(my_node())]) * input.count;
    const std::size_t after = output.count - before - mine.count;
    if (before > 0) groups_.host->broadcast({output.data, before, output.type}, 0, timeout);
    if (after > 0) {
      groups_.host->broadcast({at(mine, mine.count, size_of(mine.type)), after, output.type}, 0,
                              timeout);
    }
  }
  // Hosts of consecutive ranks: each host reduces every block to its leader
  // (into a copy of the leader's input; a rank alone on its host reads its
  // input as it is), the leaders reduce-scatter the hosts' stretches round
  // their ring (each adds its own sums to what it receives and passes that
  // on), and each leader scatters its host's stretch, summed over every
  // host. No padding is reduced or sent.
  void reduce_scatter_in_place(Buffer input, Buffer output, ReduceOp op, Duration timeout) {
    const ReduceOp sum_or_op = inner_op(op);
    const std::size_t count = output.count;
    const bool alone = groups_.host->size() == 1;
    Buffer sums = input;                             // read only, but at a leader of several ranks
    unsigned char* passing[2] = {nullptr, nullptr};  // a stretch received, one sent
    if (groups_.leaders) {
      const std::size_t copy = alone ? 0 : input.bytes();
      const std::size_t widest_bytes = output.bytes() * widest_;
      unsigned char* base = scratch(copy + 2 * widest_bytes);
      if (!alone) sums.data = std::memcpy(base, input.data, copy);
      passing[0] = base + copy;
      passing[1] = passing[0] + widest_bytes;
    }
    if (!alone) groups_.host->reduce(sums, sum_or_op, 0, timeout);
    Buffer summed = stretch(sums, my_node(), count);  // a non-leader's is not read
    if (groups_.leaders) {
      summed = stretch(sums, ring_node(-1), count);  // the first step's: this host's sums alone
      for (int step = 0; step + 1 < layout_.nodes; ++step) {
        const Buffer own = stretch(sums, ring_node(-step - 2), count);
        const Buffer received{passing[step % 2], own.count, own.type};
        ring_step(summed, received, timeout);
        reduce_into(own.type, sum_or_op, received.data, own.data, own.count);
        summed = received;
      }
    }
    groups_.host->scatter(summed, output, 0, timeout);
    if (op == ReduceOp::avg) finish_average(output.type, output.data, output.count, size());
  }
  // Hosts of consecutive ranks, small: each host gathers its ranks' blocks
  // into its own stretch of the output, the leaders sum the whole output as
  // integers, each zero but for its host's stretch (so every bit arrives as
  // it was sent), and each leader hands its host the result.
  void all_gather_by_sum(Buffer input, Buffer output, Duration timeout) {
    const Buffer mine = stretch(output, my_node(), input.count);
    groups_.host->all_gather(input, mine, timeout);  // in place when the input is its slice
    if (groups_.leaders) sum_across_leaders(output, mine, timeout);
    if (groups_.host->size() > 1) groups_.host->broadcast(output, 0, timeout);
  }
  // The same for gather (leaders_ring): each host gathers to its leader, the
  // leaders sum every host's stretch round their sync ring, and the root's
  // leader hands the whole to the root. Gloo's gather of the leaders' way
  // waits on its loop thread at each end of each message.
  void gather_by_sum(Buffer input, Buffer output, int root, Duration timeout) {
    const std::size_t bytes = input.bytes() * static_cast<std::size_t>(size());
    Buffer whole{rank_ == root ? output.data : scratch(bytes), input.count * size(), input.type};
    const Buffer mine = stretch(whole, my_node(), input.count);
    groups_.host->gather(input, mine, 0, timeout);
    if (groups_.leaders) sum_across_leaders(whole, mine, timeout);
    if (my_node() == node_of(root) && local_index(root) != 0) {
      groups_.host->broadcast(whole, 0, timeout);
    }
  }
  // Its reverse: the root's leader takes the input (a broadcast inside the
  // root's host when the root is not its leader), the leaders sum it with
  // zeros round their sync ring, and each leader scatters its host's stretch.
  void scatter_by_sum(Buffer input, Buffer output, int root, Duration timeout) {
    const std::size_t bytes = output.bytes() * static_cast<std::size_t>(size());
    Buffer whole{scratch(bytes), output.count * size(), output.type};
    const bool root_host = my_node() == node_of(root);
    if (rank_ == root) std::memcpy(whole.data, input.data, bytes);  // the sum writes its buffer
    if (root_host && local_index(root) != 0) {
      groups_.host->broadcast(whole, local_index(root), timeout);
    }
    if (groups_.leaders) {
      if (!root_host) std::memset(whole.data, 0, bytes);
      groups_.leaders->all_reduce(as_integers(whole.data, bytes), ReduceOp::sum, timeout);
    }
    groups_.host->scatter(stretch(whole, my_node(), output.count), output, 0, timeout);
  }
  // A leader's all_reduce of `whole`, zero but this host's stretch `mine`,
  // as integers: every host's stretch at every leader, bit for bit.
  void sum_across_leaders(Buffer whole, Buffer mine, Duration timeout) {
    const std::size_t before = static_cast<std::size_t>(static_cast<unsigned char*>(mine.data) -
                                                        static_cast<unsigned char*>(whole.data));
    std::memset(whole.data, 0, before);
    std::memset(at(whole, before + mine.bytes(), 1), 0, whole.bytes() - before - mine.bytes());
    groups_.leaders->all_reduce(as_integers(whole.data, whole.bytes()), ReduceOp::sum, timeout);
  }
  // Hosts of consecutive ranks, small: each host reduces the whole input to
  // its leader (into a copy; a non-leader's input is only read), the
  // leaders all-reduce it, and each leader scatters its host's stretch.
  void reduce_scatter_by_all_reduce(Buffer input, Buffer output, ReduceOp op, Duration timeout) {
    const ReduceOp sum_or_op = inner_op(op);
    Buffer sums = input;
    if (groups_.leaders) {
      sums.data = std::memcpy(scratch(input.bytes()), input.data, input.bytes());
    }
    if (groups_.host->size() > 1) groups_.host->reduce(sums, sum_or_op, 0, timeout);
    if (groups_.leaders) groups_.leaders->all_reduce(sums, sum_or_op, timeout);
    groups_.host->scatter(stretch(sums, my_node(), output.count), output, 0, timeout);
    if (op == ReduceOp::avg) finish_average(output.type, output.data, output.count, size());
  }
  // Whether the leaders' all_reduce of `bytes` takes their gloo group's sync
  // ring, by gloo's rule for its own all_gather (gloo/sync_ring.hpp). Where
  // it does, all_gather and reduce_scatter on hosts of consecutive ranks
  // without rails all-reduce the whole buffer across the leaders, unpadded
  // (all_gather_by_sum, reduce_scatter_by_all_reduce): the padded blocks (up
  // to widest × hosts × block) outgrew the sync ring at 32 KiB on hosts of 2
  // and 1 ranks, where flat gloo's ring still took them, and the way in
  // place waits on gloo's loop thread.
  bool leaders_ring(std::size_t bytes) const {
    return bytes <= gloo_backend::kMaxRingSumBytes &&
           gloo_backend::all_reduce_on_sync_ring(bytes, nodes());
  }
  // Whether gather and scatter of `bytes` in all go round the leaders' ring
  // (gather_by_sum, scatter_by_sum): as leaders_ring, but in pieces only
  // while a leader sends at most kMaxGatherRingSend in all. The leaders'
  // way sends each host's blocks once; the ring passes the whole buffer
  // round every leader. At 64 KiB on 3 and 4 hosts the ring took 0.45-1.23
  // ms and the leaders' way 0.22-1.05 ms (1 + 2 + 1 and 4 × 2 ranks, three
  // jobs each in turn: gather 0.45-0.55 against 0.24-0.35 ms on 1 + 2 + 1,
  // 1.00-1.23 against 0.46-0.68 ms on 4 × 2); on 2 hosts the ring stays.
  bool gather_ring(std::size_t bytes) const {
    return leaders_ring(bytes) &&
           (bytes <= gloo_backend::kMaxSyncBytes ||
            bytes * static_cast<std::size_t>(nodes() - 1) <= kMaxGatherRingSend);
  }
  // The host `offset` places from this one round the leaders' ring.
  int ring_node(int offset) const {
    return ((my_node() + offset) % layout_.nodes + layout_.nodes) % layout_.nodes;
  }
  // One step round the leaders' ring: `outgoing` to the next host's leader,
  // `incoming` from the previous one's. Hosts of even index send first and
  // those of odd index receive first, so that no leader's send waits on one
  // whose own send waits (with an odd count, the last host, even, sends to
  // host 0, who receives once its own send to host 1, odd, is taken).
  void ring_step(Buffer outgoing, Buffer incoming, Duration timeout) {
    Communicator& leaders = *groups_.leaders;
    const int next = ring_node(1);
    const int previous = ring_node(-1);
    if (my_node() % 2 == 0) {
      leaders.send(outgoing, next, kHostsTag, timeout);
      leaders.recv(incoming, previous, kHostsTag, timeout);
    } else {
      leaders.recv(incoming, previous, kHostsTag, timeout);
      leaders.send(outgoing, next, kHostsTag, timeout);
    }
  }
  // Its reverse: the root sends each other host's leader that host's
  // stretch of its input, and each host scatters from its leader (the
  // root's host from the root's input).
  void scatter_in_place(Buffer input, Buffer output, int root, Duration timeout) {
    const int root_node = node_of(root);
    const std::size_t local = static_cast<std::size_t>(groups_.host->size());
    Buffer host = rank_ == root
                      ? stretch(input, my_node(), output.count)
                      : Buffer{scratch(output.bytes() * local), output.count * local, output.type};
    if (groups_.leaders) {
      if (my_node() != root_node) {
        groups_.leaders->recv(host, root_node, kHostsTag, timeout);
      } else {
        for (int node = 0; node < layout_.nodes; ++node) {
          if (node != root_node) {
            groups_.leaders->send(stretch(input, node, output.count), node, kHostsTag, timeout);
          }
        }
      }
    }
    groups_.host->scatter(host, output, 0, timeout);
  }
  // Whether gather and scatter go over the flat group (kMaxFlatRanks).
  bool flat_between_ranks() const { return size() <= kMaxFlatRanks; }
  // Host `node`'s stretch of a buffer of every rank's `count` elements.
  Buffer stretch(Buffer every, int node, std::size_t count) const {
    const auto first = static_cast<std::size_t>(first_ranks_[static_cast<std::size_t>(node)]);
    return {at(every, first, every.bytes() / static_cast<std::size_t>(size())),
            count * static_cast<std::size_t>(layout_.local_size[static_cast<std::size_t>(node)]),
            every.type};
  }
  // The leaders' gather of the hosts' blocks ([local index], padded to the
  // widest host) into `every` ([host][local index]) at the leader of
  // `root_node`, without the padding: each other leader sends its host's
  // blocks alone (a host of 1 rank beside one of 8 sends 1 block, not 8).
  // The leaders' group carries no messages but hier's own.
  void gather_hosts(Buffer host, Buffer every, int root_node, Duration timeout) {
    const std::size_t count = host.count / widest_;  // one rank's
    if (my_node() != root_node) {
      groups_.leaders->send(host_blocks(host.data, my_node(), count, host.type), root_node,
                            kHostsTag, timeout);
      return;
    }
    for (int node = 0; node < layout_.nodes; ++node) {
      const Buffer place = host_place(every, node);
      if (node == my_node()) {
        std::memcpy(place.data, host.data, place.bytes());
      } else {
        groups_.leaders->recv(place, node, kHostsTag, timeout);
      }
    }
  }
  // Its reverse: the leader of `root_node` sends each other leader its
  // host's blocks of `every`, and takes its own into `mine`.
  void scatter_hosts(Buffer every, Buffer mine, int root_node, Duration timeout) {
    const std::size_t count = mine.count / widest_;
    if (my_node() != root_node) {
      groups_.leaders->recv(host_blocks(mine.data, my_node(), count, mine.type), root_node,
                            kHostsTag, timeout);
      return;
    }
    for (int node = 0; node < layout_.nodes; ++node) {
      const Buffer place = host_place(every, node);
      if (node == my_node()) {
        std::memcpy(mine.data, place.data, place.bytes());
      } else {
        groups_.leaders->send(place, node, kHostsTag, timeout);
      }
    }
  }
  // Host `node`'s blocks in `every` ([host][local index], padded to the
  // widest host), without its padding.
  Buffer host_place(Buffer every, int node) const {
    const std::size_t places = widest_ * nodes();
    return host_blocks(at(every, static_cast<std::size_t>(node) * widest_, every.bytes() / places),
                       node, every.count / places, every.type);
  }
  // The blocks of `node`'s ranks at `data`, `count` elements each.
  Buffer host_blocks(void* data, int node, std::size_t count, DataType type) const {
    return {data,
            count * static_cast<std::size_t>(layout_.local_size[static_cast<std::size_t>(node)]),
            type};
  }
  // From [host][local index], padded to the widest host (with rails every
  // host is that wide), to rank order.
  void unpad(Buffer every, Buffer output) const {
    const std::size_t block = output.bytes() / static_cast<std::size_t>(size());
    for (int r = 0; r < size(); ++r)
      std::memcpy(at(output, r, block), at(every, padded_place(r), block), block);
  }
  // The reverse: `block`-byte blocks in rank order to [host][local index].
  void pad(Buffer ranked, Buffer every, std::size_t block) const {
    for (int r = 0; r < size(); ++r)
      std::memcpy(at(every, padded_place(r), block), at(ranked, r, block), block);
  }
  static unsigned char* at(Buffer buffer, std::size_t index, std::size_t block) {
    return static_cast<unsigned char*>(buffer.data) + index * block;
  }
  static unsigned char* at(Buffer buffer, int index, std::size_t block) {
    return at(buffer, static_cast<std::size_t>(index), block);
  }
  // This rank's scratch memory, at least `bytes` (operator new's alignment:
  // enough for every DataType, and every block is a multiple of its size).
  unsigned char* scratch(std::size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }
  std::size_t nodes() const { return static_cast<std::size_t>(layout_.nodes); }
  std::size_t padded_place(int rank) const {
    return static_cast<std::size_t>(node_of(rank)) * widest_ +
           static_cast<std::size_t>(local_index(rank));
  }
  int node_of(int rank) const { return layout_.node_of[static_cast<std::size_t>(rank)]; }
  int local_index(int rank) const { return layout_.local_index[static_cast<std::size_t>(rank)]; }
  int my_node() const { return node_of(rank_); }
  // Where rank r's block sits when blocks are sorted by local index, then host.
  std::size_t place_in_rails(int rank) const {
    return static_cast<std::size_t>(local_index(rank)) * static_cast<std::size_t>(layout_.nodes) +
           static_cast<std::size_t>(node_of(rank));
  }
  // Null when the all-reduce goes the leaders' way only.
  Communicator* rail() const {
    if (!groups_.rails) return nullptr;
    return groups_.leaders ? groups_.leaders.get() : groups_.rail.get();
  }

  int rank_;
  std::vector<std::string> hosts_;  // every rank's host identity
  HostLayout layout_;
  Groups groups_;
  std::shared_ptr<Store> store_;
  std::string address_;
  Duration timeout_;
  std::size_t widest_;  // the most ranks any host runs
  // Per host, its first rank, where each host's ranks follow one another
  // (as cohort run numbers them); empty where they do not.
  std::vector<int> first_ranks_;
  std::vector<unsigned char> scratch_;
  int splits_ = 0;
  std::mutex lazy_mutex_;  // guards the two below
  std::unique_ptr<Communicator> flat_;
  std::map<int, std::unique_ptr<Communicator>> pairs_;  // by the peer's rank
};

// Rank 0's choice, for every rank: all of them must connect the same groups.
bool agree_on_rails(Store& store, int rank, const HostLayout& layout, Duration timeout) {
  if (rank == 0) {
    const char* wanted = std::getenv("COHORT_HIER_RAILS");
    const bool rails = layout.uniform() && (wanted == nullptr || std::string_view(wanted) != "0");
    store.set("hier/rails", rails ? "1" : "0");
    return rails;
  }
  return store.get("hier/rails", timeout) == "1";
}

// One of hier's groups: `rank` of `size` on a store view of its own.
std::unique_ptr<Communicator> connect_group(const BackendContext& parent, const std::string& name,
                                            int rank, int size, std::string_view backend,
                                            std::vector<std::string> hosts, int machine_ranks,
                                            bool sized_by_owner) {
  LaunchInfo info;
  info.rank.value = rank;
  info.world_size.value = size;
  BackendContext context;
  context.info = &info;
  context.timeout = parent.timeout;
  context.store = std::make_shared<PrefixStore>(cat("hier/", name), parent.store);
  context.address = parent.address;
  context.hosts = std::move(hosts);
  context.machine_ranks = machine_ranks;
  context.messages_sized_by_owner = sized_by_owner;
  return create_communicator(context, size == 1 ? "" : backend);
}

}  // namespace

std::string unviable_because(const BackendContext& context) {
  const LaunchInfo& info = *context.info;
  if (!context.store) return "it needs the job's store to meet its ranks";
  if (!context.hosts.empty()) {
    const HostLayout layout = lay_out(context.hosts);
    if (layout.nodes < 2) return "every rank runs on this host (shm serves that)";
    if (std::all_of(layout.local_size.begin(), layout.local_size.end(),
                    [](int ranks) { return ranks == 1; })) {
      return cat("each of the ", layout.nodes,
                 " hosts runs one rank: a flat group moves the same data");
    }
    return {};
  }
  // Not exchanged yet (choosing without connecting): the launcher's word,
  // the same on every rank where it counts the nodes (a rank alone on its
  // host beside hosts of several is in a job hier serves).
  const int nodes = info.num_nodes.value;
  const int world = info.world_size.value;
  if (nodes == 1 || info.local_world_size.value == world) {
    return "every rank runs on this host (shm serves that)";
  }
  if (nodes > 1 && world > nodes) return {};
  if (nodes > 1)
    return cat("each of the ", nodes, " hosts runs one rank: a flat group moves the same data");
  if (info.local_world_size.value == 1) return "this host runs one rank of the job";
  return "whether ranks share hosts is known only once the ranks meet";
}

std::unique_ptr<Communicator> create(const BackendContext& context) {
  const int rank = context.info->rank.value;
  const int size = context.info->world_size.value;
  std::vector<std::string> hosts = context.hosts;
  if (hosts.empty()) hosts = exchange_host_identities(*context.store, rank, size, context.timeout);
  HostLayout layout = lay_out(hosts);
  const int node = layout.node_of[static_cast<std::size_t>(rank)];
  const int local = layout.local_index[static_cast<std::size_t>(rank)];
  std::vector<std::string> host_of_group(
      static_cast<std::size_t>(layout.local_size[static_cast<std::size_t>(node)]),
      hosts[static_cast<std::size_t>(rank)]);
  Groups groups;
  // Hosts that are namespaces or containers of one machine share its CPUs:
  // the host group then waits as with more ranks than cores, if so.
  groups.host = connect_group(context, cat("host", node), local,
                              layout.local_size[static_cast<std::size_t>(node)], "shm",
                              std::move(host_of_group), ranks_on_same_machine(hosts, rank));
  if (local == 0) {
    groups.leaders = connect_group(context, "leaders", node, layout.nodes, "gloo", {}, 0, true);
  }
  groups.rails = agree_on_rails(*context.store, rank, layout, context.timeout);
  if (groups.rails && local != 0) {
    groups.rail =
        connect_group(context, cat("rail", local), node, layout.nodes, "gloo", {}, 0, true);
  }
  return std::make_unique<Communicator>(
      std::make_unique<HierBackend>(rank, std::move(hosts), std::move(layout), std::move(groups),
                                    context.store, context.address, context.timeout));
}

}  // namespace cohort::detail::hier_backend
