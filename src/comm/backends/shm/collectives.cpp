#include "comm/backends/shm/collectives.hpp"

#include <algorithm>
#include <exception>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "comm/copy.hpp"
#include "comm/reduce.hpp"

namespace cohort::detail::shm_backend {
namespace {

// Bytes of each peer's buffer that all_reduce and reduce_scatter reduce at
// a time: in single copies read into scratch that stays in cache (one piece
// per peer; 64 KiB and 1 MiB were slower at 1-8 MiB, n = 2), in shared
// memory read in place.
constexpr std::size_t kSingleCopyPieceBytes = std::size_t{256} << 10;
constexpr std::size_t kSharedPieceBytes = std::size_t{64} << 10;
// Bytes of its own slice that the large protocol reduces before it copies
// them into the rank's buffer: well inside L1.
constexpr std::size_t kReducedBlockBytes = std::size_t{16} << 10;

unsigned char* bytes_of(const Buffer& buffer, std::size_t element) {
  return static_cast<unsigned char*>(buffer.data) + element * size_of(buffer.type);
}

void copy(void* to, const void* from, std::size_t bytes) {
  if (to != from) copy_bytes(to, from, bytes);
}

// Elements of `type` per chunk when each rank's slot holds `parts` pieces.
std::size_t chunk_elements(const Group& group, DataType type, std::size_t parts) {
  return std::max<std::size_t>(1, group.slot_bytes() / parts / size_of(type));
}

// [begin, end) of slice `index` when `count` elements are cut in `parts`.
std::size_t slice_begin(std::size_t count, int parts, int index) {
  return count * static_cast<std::size_t>(index) / static_cast<std::size_t>(parts);
}

// Every rank's slot of the last round, offset by `offset` bytes.
std::vector<const void*> slots_of_round(Group& group, std::size_t offset) {
  std::vector<const void*> inputs(static_cast<std::size_t>(group.size()));
  for (int r = 0; r < group.size(); ++r)
    inputs[static_cast<std::size_t>(r)] = group.slot(r) + offset;
  return inputs;
}

// The large protocol, one chunk at a time; `everyone` false: only `root`
// copies the result out.
void reduce_in_two_rounds(Group& group, Buffer data, ReduceOp op, bool everyone, int root,
                          const Call& call) {
  const std::size_t element = size_of(data.type);
  const std::size_t per_chunk = chunk_elements(group, data.type, 1);
  const int n = group.size();
  for (std::size_t first = 0; first < data.count; first += per_chunk) {
    const std::size_t count = std::min(per_chunk, data.count - first);
    // This rank's own slice is reduced by this rank alone, straight from its
    // buffer: only the others' slices go through the slot.
    const std::size_t begin = slice_begin(count, n, group.rank());
    const std::size_t end = slice_begin(count, n, group.rank() + 1);
    copy_bytes(group.next_slot(), bytes_of(data, first), begin * element);
    copy_bytes(group.next_slot() + end * element, bytes_of(data, first + end),
               (count - end) * element);
    group.arrive();
    group.wait_all(call);
    std::vector<const void*> inputs = slots_of_round(group, begin * element);
    inputs[static_cast<std::size_t>(group.rank())] = bytes_of(data, first + begin);
    const bool keeps = everyone || group.rank() == root;
    unsigned char* const reduced = group.next_slot() + begin * element;
    // Into the slot for the others and, a block at a time while it is still
    // in L1, into this rank's own buffer: not read back from the slot later.
    const std::size_t per_block =
        keeps ? std::max<std::size_t>(1, kReducedBlockBytes / element) : end - begin;
    for (std::size_t done = 0; done < end - begin; done += per_block) {
      const std::size_t block = std::min(per_block, end - begin - done);
      reduce_many(data.type, op, reduced + done * element, inputs.data(), n, block);
      if (keeps)
        copy_bytes(bytes_of(data, first + begin + done), reduced + done * element, block * element);
      for (const void*& input : inputs)
        input = static_cast<const unsigned char*>(input) + block * element;
    }
    group.arrive();
    group.wait_all(call);
    if (!keeps) continue;
    for (int r = 0; r < n; ++r) {
      if (r == group.rank()) continue;  // in place already
      const std::size_t from = slice_begin(count, n, r);
      const std::size_t to = slice_begin(count, n, r + 1);
      copy_bytes(bytes_of(data, first + from), group.slot(r) + from * element,
                 (to - from) * element);
    }
  }
}

// The small protocol: one round; `everyone` false: only `root` reduces.
void reduce_in_one_round(Group& group, Buffer data, ReduceOp op, bool everyone, int root,
                         const Call& call) {
  copy_bytes(group.next_slot(), data.data, data.bytes());
  group.arrive();
  group.wait_all(call);
  if (!everyone && group.rank() != root) return;
  const std::vector<const void*> inputs = slots_of_round(group, 0);
  reduce_many(data.type, op, data.data, inputs.data(), group.size(), data.count);
}

// What every rank published for its peers to read (all_reduce: and write),
// in one round, and how a peer reaches it: with loads and stores, when every
// rank's buffer is in one allocation that every rank maps (shared memory:
// Communicator::allocate), or in one copy by the kernel (single copies:
// Group::read_from, Group::write_to). A last round (after_single_copies)
// keeps every buffer still until its peers are done with it (all_reduce:
// have written their slices into it).
class Published {
 public:
  /// nullopt, after the round, unless every rank's [data, data + bytes) is
  /// in one allocation of the group's shared memory.
  static std::optional<Published> in_shared_memory(Group& group, const void* data,
                                                   std::size_t bytes, const Call& call) {
    Published published(group, call);
    const std::uint64_t mine = group.memory().place_of(data, bytes, published.keep_);
    const std::vector<std::uint64_t> places = group.exchange(mine, call);
    for (const std::uint64_t place : places) {
      if (place == 0 || SharedMemory::allocation_of(place) != SharedMemory::allocation_of(mine))
        return std::nullopt;
    }
    for (int r = 0; r < group.size(); ++r) {
      published.mapped_.push_back(
          r == group.rank()
              ? static_cast<unsigned char*>(const_cast<void*>(data))
              : SharedMemory::address(published.keep_, r, places[static_cast<std::size_t>(r)]));
    }
    published.begin_copies();
    return published;
  }
  static Published by_address(Group& group, const void* data, const Call& call) {
    Published published(group, call);
    published.where_ = group.exchange(reinterpret_cast<std::uint64_t>(data), call);
    published.begin_copies();
    return published;
  }

  /// Copies `bytes` at `offset` into `rank`'s buffer to `to`.
  void read(int rank, void* to, std::size_t offset, std::size_t bytes) const {
    const auto index = static_cast<std::size_t>(rank);
    if (!mapped_.empty()) {
      copy(to, mapped_[index] + offset, bytes);
    } else {
      group_.read_from(rank, to, where_[index] + offset, bytes, call_);
    }
  }
  /// Copies `bytes` from `from` into `rank`'s buffer at `offset`: only
  /// where the collective lets this rank write (all_reduce: its slice).
  void write(int rank, std::size_t offset, const void* from, std::size_t bytes) const {
    const auto index = static_cast<std::size_t>(rank);
    if (!mapped_.empty()) {
      group_.check_lender(rank, true, call_);
      copy(mapped_[index] + offset, from, bytes);
    } else {
      group_.write_to(rank, where_[index] + offset, from, bytes, call_);
    }
  }
  /// Whether the buffers are in shared memory (mapped() gives them).
  bool shared() const noexcept { return !mapped_.empty(); }
  /// `rank`'s buffer at `offset`, in this process; nullptr under single
  /// copies.
  unsigned char* mapped(int rank, std::size_t offset) const {
    return mapped_.empty() ? nullptr : mapped_[static_cast<std::size_t>(rank)] + offset;
  }

  Published(Published&& other) noexcept
      : group_(other.group_),
        call_(other.call_),
        where_(std::move(other.where_)),
        mapped_(std::move(other.mapped_)),
        keep_(std::move(other.keep_)),
        exceptions_(other.exceptions_),
        copying_(std::exchange(other.copying_, false)) {}
  Published& operator=(Published&&) = delete;
  /// This rank is done copying with its peers' buffers (Group::end_copies).
  /// Left by an exception (this rank stops the call part-way), its peers may
  /// still be copying with its own: it withdraws (Group::withdraw) before
  /// the buffer is the caller's again.
  ~Published() {
    if (copying_) group_.end_copies();
    if (std::uncaught_exceptions() > exceptions_) group_.withdraw();
  }

 private:
  Published(Group& group, const Call& call) : group_(group), call_(call) {}
  // After the round that published every rank's buffer.
  void begin_copies() {
    group_.begin_copies();
    copying_ = true;
  }
  Group& group_;
  const Call& call_;
  std::vector<std::uint64_t> where_;             // single copies: each rank's address
  std::vector<unsigned char*> mapped_;           // shared memory: each rank's buffer here
  std::shared_ptr<void> keep_;                   // shared memory: the allocation, mapped
  int exceptions_ = std::uncaught_exceptions();  // when made
  bool copying_ = false;                         // begin_copies() called
};

void after_single_copies(Group& group, const Call& call) {
  group.arrive();
  group.wait_all(call);
}

// Whether a collective whose block is `bytes` (Window) takes single copies.
bool in_single_copies(const Group& group, const Window& window, std::size_t bytes) {
  return group.single_copy() && window.contains(bytes);
}

// Where a collective's peers find this rank's `data` (`bytes` of it) in
// shared memory, when its window (`which`) for a block of `block` bytes says
// to look and every rank's is there; else nullopt. Every rank learns the same.
std::optional<Published> publish_shared(Group& group, const Tuning& tuning,
                                        Window Tuning::Windows::*which, std::size_t block,
                                        const void* data, std::size_t bytes, const Call& call) {
  if (group.memory().any() && (tuning.shared_memory.*which).contains(block))
    return Published::in_shared_memory(group, data, bytes, call);
  return std::nullopt;
}

// Where a collective's peers read this rank's `data` from: in shared memory
// (publish_shared), else in single copies by its window, else nowhere
// (nullopt: the rounds). Every rank learns the same.
std::optional<Published> publish(Group& group, const Tuning& tuning, Window Tuning::Windows::*which,
                                 std::size_t block, const void* data, std::size_t bytes,
                                 const Call& call) {
  if (auto shared = publish_shared(group, tuning, which, block, data, bytes, call)) return shared;
  if (in_single_copies(group, tuning.single_copies.*which, block))
    return Published::by_address(group, data, call);
  return std::nullopt;
}

// gather and scatter in single copies: whether the root copies `rank`'s
// block itself (reads it from the rank's input, writes it into the rank's
// output), or the rank does (writes it into the root's output, reads it from
// the root's input): the root at an even distance from it, the rank at an
// odd one, so that at n = 2 the peer copies and the root waits for nobody.
// The kernel pins a process's pages for another's copy one at a time under
// the lock of its page table, and two peers copying with the root's memory
// at once wait on each other there: scatter of 1 MiB at n = 3, both peers
// reading, spent 22 % of all cycles in that spin lock (2026-12-07). The
// root's own copies touch no other process's page table; those of the peers
// left are half as many as before.
bool copied_by_root(int rank, int root, int n) {
  return ((rank - root + n) % n) % 2 == 0;
}

// Reduces `count` elements into `out`: this rank's own at `mine`, and every
// peer's at `offset` bytes into the buffer it published, a piece at a time:
// in shared memory straight from the peer's buffer, in single copies each
// peer's piece read into scratch that stays in cache. `out` may be `mine`,
// or nullptr: then each piece goes into scratch of its own, overwritten by
// the next. After each piece, `reduced(first, count, result)` (elements from
// the start; `result` the piece's first), while the piece is still in cache.
template <class Reduced>
void reduce_from_peers(const Group& group, DataType type, ReduceOp op, void* out, const void* mine,
                       const Published& peers, std::size_t offset, std::size_t count,
                       Reduced&& reduced) {
  const std::size_t element = size_of(type);
  const int n = group.size();
  const std::size_t piece = std::min(
      count, std::max<std::size_t>(
                 1, (peers.shared() ? kSharedPieceBytes : kSingleCopyPieceBytes) / element));
  // Not zero-filled: every byte is read into before it is used. The peers'
  // pieces (single copies), then the result's (out == nullptr).
  const std::size_t scratch_pieces =
      (peers.shared() ? 0 : static_cast<std::size_t>(n)) + (out == nullptr ? 1 : 0);
  std::unique_ptr<unsigned char[]> scratch;
  if (scratch_pieces > 0) scratch.reset(new unsigned char[scratch_pieces * piece * element]);
  unsigned char* const result_piece =
      out == nullptr ? scratch.get() + (scratch_pieces - 1) * piece * element : nullptr;
  std::vector<const void*> inputs(static_cast<std::size_t>(n));
  for (std::size_t at = 0; at < count; at += piece) {
    const std::size_t elements = std::min(piece, count - at);
    for (int r = 0; r < n; ++r) {
      const auto index = static_cast<std::size_t>(r);
      if (r == group.rank()) {
        inputs[index] = static_cast<const unsigned char*>(mine) + at * element;
      } else if (peers.shared()) {
        inputs[index] = peers.mapped(r, offset + at * element);
      } else {
        unsigned char* into = scratch.get() + index * piece * element;
        peers.read(r, into, offset + at * element, elements * element);
        inputs[index] = into;
      }
    }
    unsigned char* const result =
        out == nullptr ? result_piece : static_cast<unsigned char*>(out) + at * element;
    reduce_many(type, op, result, inputs.data(), n, elements);
    reduced(at, elements, static_cast<const unsigned char*>(result));
  }
}

// The first element of slice `index` of `count` elements cut in `parts`,
// on a cache line of the buffer's start (`unit` elements a line), so no two
// ranks store into one line.
std::size_t line_slice_begin(std::size_t count, std::size_t unit, int parts, int index) {
  if (index >= parts) return count;
  return std::min(count, slice_begin(count / unit, parts, index) * unit);
}

// all_reduce (`root` -1) and reduce on buffers every rank published
// (collectives.hpp): this rank reduces its slice of every buffer, cut on
// cache lines so that no two ranks store into one line, and writes each
// piece, while it is still in cache, into every peer's buffer (all_reduce)
// or the root's alone (reduce). Into its own buffer too, but for a reduce's
// rank other than the root, which reduces into scratch, a piece at a time,
// and leaves its buffer as it was. Safe without locks: only this rank writes
// its slice of any buffer, and every input was complete before the round
// that published them. A last round waits until every slice is written.
void reduce_in_single_copies(Group& group, Buffer data, ReduceOp op, int root,
                             const Published& buffers, const Call& call) {
  const int n = group.size();
  const int me = group.rank();
  const std::size_t element = size_of(data.type);
  const std::size_t unit = std::max<std::size_t>(1, 64 / element);
  const std::size_t begin = line_slice_begin(data.count, unit, n, me);
  const std::size_t end = line_slice_begin(data.count, unit, n, me + 1);
  unsigned char* slice = bytes_of(data, begin);
  const bool keeps = root < 0 || me == root;
  reduce_from_peers(group, data.type, op, keeps ? slice : nullptr, slice, buffers, begin * element,
                    end - begin,
                    [&](std::size_t first, std::size_t count, const unsigned char* result) {
                      for (int r = 0; r < n; ++r) {
                        if (r != me && (root < 0 || r == root))
                          buffers.write(r, (begin + first) * element, result, count * element);
                      }
                    });
  after_single_copies(group, call);
}

}  // namespace

void all_reduce(Group& group, const Tuning& tuning, Buffer data, ReduceOp op, const Call& call) {
  if (const auto buffers = publish(group, tuning, &Tuning::Windows::all_reduce, data.bytes(),
                                   data.data, data.bytes(), call))
    return reduce_in_single_copies(group, data, op, -1, *buffers, call);
  if (data.bytes() <= std::min(tuning.small_bytes, group.slot_bytes())) {
    reduce_in_one_round(group, data, op, true, 0, call);
  } else {
    reduce_in_two_rounds(group, data, op, true, 0, call);
  }
}

void reduce(Group& group, const Tuning& tuning, Buffer data, ReduceOp op, int root,
            const Call& call) {
  // all_reduce's windows: reduce's copies are all_reduce's but for the
  // writes into every rank other than the root.
  if (const auto buffers = publish(group, tuning, &Tuning::Windows::all_reduce, data.bytes(),
                                   data.data, data.bytes(), call))
    return reduce_in_single_copies(group, data, op, root, *buffers, call);
  if (data.bytes() <=
      std::min(std::max(tuning.small_bytes, tuning.reduce_small_bytes), group.slot_bytes())) {
    reduce_in_one_round(group, data, op, false, root, call);
  } else {
    reduce_in_two_rounds(group, data, op, false, root, call);
  }
}

void broadcast(Group& group, const Tuning& tuning, Buffer data, int root, const Call& call) {
  if (const auto peers = publish(group, tuning, &Tuning::Windows::broadcast, data.bytes(),
                                 data.data, data.bytes(), call)) {
    if (group.rank() != root) peers->read(root, data.data, 0, data.bytes());
    return after_single_copies(group, call);
  }
  if (data.bytes() <= tuning.posted_broadcast_bytes) {
    if (group.rank() == root) {
      group.post(data.data, data.bytes(), call);
    } else {
      group.take(data.data, data.bytes(), root, call);
    }
    return;
  }
  const std::size_t element = size_of(data.type);
  std::size_t per_chunk = chunk_elements(group, data.type, 1);
  if (tuning.broadcast_chunk_bytes > 0)
    per_chunk = std::clamp<std::size_t>(tuning.broadcast_chunk_bytes / element, 1, per_chunk);
  for (std::size_t first = 0; first < data.count; first += per_chunk) {
    const std::size_t bytes = std::min(per_chunk, data.count - first) * element;
    if (group.rank() == root) copy_bytes(group.next_slot(), bytes_of(data, first), bytes);
    group.arrive();
    group.wait_all(call);
    if (group.rank() != root) copy_bytes(bytes_of(data, first), group.slot(root), bytes);
  }
}

namespace {

// gather (`into_root`) and scatter in single copies, each rank's `own`
// block of `bytes` being block `rank` of the root's `whole` buffer
// (copied_by_root says who copies it): the root publishes `whole`, every
// other rank `own`.
void root_and_ranks_in_single_copies(Group& group, void* whole, void* own, std::size_t bytes,
                                     int root, bool into_root, const Call& call) {
  const int n = group.size();
  const int me = group.rank();
  const Published published = Published::by_address(group, me == root ? whole : own, call);
  const auto block_of = [&](int rank) {
    return static_cast<unsigned char*>(whole) + static_cast<std::size_t>(rank) * bytes;
  };
  if (me == root) {
    if (into_root) {
      copy(block_of(me), own, bytes);
    } else {
      copy(own, block_of(me), bytes);
    }
    for (int step = 1; step < n; ++step) {
      const int peer = (root + step) % n;
      if (!copied_by_root(peer, root, n)) continue;
      if (into_root) {
        published.read(peer, block_of(peer), 0, bytes);
      } else {
        published.write(peer, 0, block_of(peer), bytes);
      }
    }
  } else if (!copied_by_root(me, root, n)) {
    const std::size_t at = static_cast<std::size_t>(me) * bytes;
    if (into_root) {
      published.write(root, at, own, bytes);
    } else {
      published.read(root, own, at, bytes);
    }
  }
  after_single_copies(group, call);
}

// all_gather (`root` -1) and gather: every rank's input, chunk by chunk,
// into `output` at the ranks that collect it.
void gather_rounds(Group& group, const Tuning& tuning, Window Tuning::Windows::*window,
                   Buffer input, Buffer output, int root, const Call& call) {
  const std::size_t element = size_of(input.type);
  const bool collects = root < 0 || group.rank() == root;
  std::optional<Published> peers =
      publish_shared(group, tuning, window, input.bytes(), input.data, input.bytes(), call);
  if (!peers && in_single_copies(group, tuning.single_copies.*window, input.bytes())) {
    if (root >= 0) {
      return root_and_ranks_in_single_copies(group, output.data, input.data, input.bytes(), root,
                                             true, call);
    }
    peers.emplace(Published::by_address(group, input.data, call));
  }
  if (peers) {
    for (int r = 0; r < group.size() && collects; ++r) {
      unsigned char* into = bytes_of(output, static_cast<std::size_t>(r) * input.count);
      if (r == group.rank()) {
        copy(into, input.data, input.bytes());
      } else {
        peers->read(r, into, 0, input.bytes());
      }
    }
    return after_single_copies(group, call);
  }
  const std::size_t per_chunk = chunk_elements(group, input.type, 1);
  for (std::size_t first = 0; first < input.count; first += per_chunk) {
    const std::size_t count = std::min(per_chunk, input.count - first);
    copy_bytes(group.next_slot(), bytes_of(input, first), count * element);
    group.arrive();
    group.wait_all(call);
    if (!collects) continue;
    for (int r = 0; r < group.size(); ++r) {
      copy(bytes_of(output, static_cast<std::size_t>(r) * input.count + first), group.slot(r),
           count * element);
    }
  }
}

// Rounds where each rank shares one piece for every rank: `slices` holds
// size() slices of `count` elements; chunk by chunk, piece r of this rank's
// slot is (slice r, chunk), this rank's own piece left out when `keep_own`
// (it reads that from `slices` itself). `use(first, n)` reads the round's
// slots.
template <class Use>
void exchange_rounds(Group& group, const Buffer* slices, bool keep_own, std::size_t count,
                     DataType type, Use&& use, const Call& call) {
  const std::size_t element = size_of(type);
  const auto n = static_cast<std::size_t>(group.size());
  const std::size_t per_chunk = chunk_elements(group, type, n);
  for (std::size_t first = 0; first < count; first += per_chunk) {
    const std::size_t chunk = std::min(per_chunk, count - first);
    if (slices != nullptr) {
      for (std::size_t r = 0; r < n; ++r) {
        if (keep_own && r == static_cast<std::size_t>(group.rank())) continue;
        copy_bytes(group.next_slot() + r * chunk * element, bytes_of(*slices, r * count + first),
                   chunk * element);
      }
    }
    group.arrive();
    group.wait_all(call);
    use(first, chunk);
  }
}

}  // namespace

void all_gather(Group& group, const Tuning& tuning, Buffer input, Buffer output, const Call& call) {
  gather_rounds(group, tuning, &Tuning::Windows::all_gather, input, output, -1, call);
}

void gather(Group& group, const Tuning& tuning, Buffer input, Buffer output, int root,
            const Call& call) {
  gather_rounds(group, tuning, &Tuning::Windows::gather, input, output, root, call);
}

void scatter(Group& group, const Tuning& tuning, Buffer input, Buffer output, int root,
             const Call& call) {
  const std::size_t element = size_of(output.type);
  const auto me = static_cast<std::size_t>(group.rank());
  if (const auto peers = publish_shared(group, tuning, &Tuning::Windows::scatter, output.bytes(),
                                        input.data, input.bytes(), call)) {
    if (group.rank() == root) {
      copy(output.data, bytes_of(input, me * output.count), output.bytes());
    } else {
      peers->read(root, output.data, me * output.bytes(), output.bytes());
    }
    return after_single_copies(group, call);
  }
  if (in_single_copies(group, tuning.single_copies.scatter, output.bytes()))
    return root_and_ranks_in_single_copies(group, input.data, output.data, output.bytes(), root,
                                           false, call);
  exchange_rounds(
      group, group.rank() == root ? &input : nullptr, false, output.count, output.type,
      [&](std::size_t first, std::size_t chunk) {
        copy_bytes(bytes_of(output, first), group.slot(root) + me * chunk * element,
                   chunk * element);
      },
      call);
}

void reduce_scatter(Group& group, const Tuning& tuning, Buffer input, Buffer output, ReduceOp op,
                    const Call& call) {
  const std::size_t element = size_of(output.type);
  const auto me = static_cast<std::size_t>(group.rank());
  if (const auto peers = publish(group, tuning, &Tuning::Windows::reduce_scatter, output.bytes(),
                                 input.data, input.bytes(), call)) {
    // Peer r reads slice r of this rank's input; this rank writes only its
    // output, which is slice `me` of its input when in place.
    reduce_from_peers(group, output.type, op, output.data, bytes_of(input, me * output.count),
                      *peers, me * output.bytes(), output.count,
                      [](std::size_t, std::size_t, const unsigned char*) {});
    return after_single_copies(group, call);
  }
  exchange_rounds(
      group, &input, true, output.count, output.type,
      [&](std::size_t first, std::size_t chunk) {
        std::vector<const void*> inputs = slots_of_round(group, me * chunk * element);
        inputs[me] = bytes_of(input, me * output.count + first);
        reduce_many(output.type, op, bytes_of(output, first), inputs.data(), group.size(), chunk);
      },
      call);
}

void all_to_all(Group& group, const Tuning& tuning, Buffer input, Buffer output, const Call& call) {
  const std::size_t element = size_of(output.type);
  const auto me = static_cast<std::size_t>(group.rank());
  const std::size_t count = output.count / static_cast<std::size_t>(group.size());
  // In place, a rank's output blocks are the inputs its peers read: rounds.
  const std::optional<Published> peers =
      input.data == output.data ? std::nullopt
                                : publish(group, tuning, &Tuning::Windows::all_to_all,
                                          count * element, input.data, input.bytes(), call);
  if (peers) {
    // Rank r starts with its own block and then reads from r + 1, r + 2, ...:
    // no two ranks read the same peer's memory at the same step.
    const auto n = static_cast<std::size_t>(group.size());
    for (std::size_t step = 0; step < n; ++step) {
      const std::size_t r = (me + step) % n;
      if (r == me) {
        copy(bytes_of(output, r * count), bytes_of(input, me * count), count * element);
      } else {
        peers->read(static_cast<int>(r), bytes_of(output, r * count), me * count * element,
                    count * element);
      }
    }
    return after_single_copies(group, call);
  }
  exchange_rounds(
      group, &input, true, count, output.type,
      [&](std::size_t first, std::size_t chunk) {
        for (std::size_t r = 0; r < static_cast<std::size_t>(group.size()); ++r) {
          // This rank's own piece, straight across (nothing when in place).
          const void* from = r == me ? bytes_of(input, me * count + first)
                                     : group.slot(static_cast<int>(r)) + me * chunk * element;
          copy(bytes_of(output, r * count + first), from, chunk * element);
        }
      },
      call);
}

void barrier(Group& group, const Call& call) {
  group.arrive();
  group.wait_all(call);
}

}  // namespace cohort::detail::shm_backend
