#include "comm/backend.hpp"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <type_traits>

#include <mpi.h>

#include <cohort/errors.hpp>

#include "comm/backends/mpi/element_types.hpp"
#include "comm/backends/mpi/factory.hpp"
#include "comm/backends/mpi/lost_record.hpp"
#include "comm/backends/mpi/runtime.hpp"
#include "comm/backends/mpi/staged_buffers.hpp"
#include "comm/kit/buffers.hpp"
#include "comm/kit/peers.hpp"
#include "comm/local_mailbox.hpp"
#include "comm/reduce.hpp"
#include "core/strings.hpp"
#include "env/launchers/launcher.hpp"

namespace cohort::detail::mpi_backend {
namespace {

using Clock = std::chrono::steady_clock;

// How calls wait. Direct: MPI's blocking call, as fast as MPI itself; when a
// rank dies, Open MPI's mpirun ends the whole job (it kills the others and
// names the rank), so nobody waits on the dead. Watched: the non-blocking
// form, tested until done while dead local peers, the store's record and
// the deadline are checked every kCheckEvery: for jobs the runtime keeps
// alive after a death (mpirun --enable-recovery), where Open MPI's blocking
// calls would never return. COHORT_MPI_WATCH=1 or 0 forces either.
bool watched() {
  if (const char* forced = std::getenv("COHORT_MPI_WATCH")) return std::string_view(forced) == "1";
  const char* recovery = std::getenv("OMPI_MCA_orte_enable_recovery");
  return recovery != nullptr && std::string_view(recovery) == "1";
}
constexpr std::chrono::milliseconds kCheckEvery{5};
constexpr int kStoreEvery = 20;  // of those checks: the store is a network round trip

// MPI counts are int.
int count_of(std::size_t count, const char* collective) {
  if (count > static_cast<std::size_t>(INT_MAX)) {
    throw InvalidArgument(cat(collective, ": ", count,
                              " elements per rank are more than MPI's int counts hold; split "
                              "the buffer, or use COHORT_BACKEND=gloo"));
  }
  return static_cast<int>(count);
}

// Whether `part` is slice number `index` of `whole` (in-place use).
bool is_slice(const Buffer& part, const Buffer& whole, int index) {
  return part.data ==
         static_cast<unsigned char*>(whole.data) + static_cast<std::size_t>(index) * part.bytes();
}

std::string error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

class MpiBackend final : public Backend {
 public:
  // `group`: a name for this communicator, the same on every rank of it.
  MpiBackend(MPI_Comm comm, Duration timeout, bool watch, std::shared_ptr<Store> store,
             const std::string& group)
      : comm_(comm),
        timeout_(timeout),
        watch_(watch),
        store_(std::move(store)),
        group_(group),
        record_(group) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    int* tag_bound = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_bound, &found);
    tag_bound_ = found != 0 ? *tag_bound : 32767;
    if (watch_) peers_ = exchange_peers();
  }

  ~MpiBackend() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    // A broken group may have a collective still pending: leave it be.
    if (!finalized && broken_.empty()) {
      auto lock = serialise_calls();
      MPI_Comm_free(&comm_);
    }
  }

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::string_view name() const noexcept override { return "mpi"; }
  Duration default_timeout() const noexcept override { return timeout_; }

  void all_reduce(Buffer data, ReduceOp op, Duration timeout) override {
    const int count = count_of(data.count, "all_reduce");
    const MPI_Datatype type = mpi_type(data.type);
    const MPI_Op reduction = mpi_op(data.type, op);
    StagedBuffers staged(watch_, staging_);
    void* const at = staged.update(data).data;
    call(
        "all_reduce", timeout,
        [&] { return MPI_Allreduce(MPI_IN_PLACE, at, count, type, reduction, comm_); },
        [&](MPI_Request* request) {
          return MPI_Iallreduce(MPI_IN_PLACE, at, count, type, reduction, comm_, request);
        },
        &staged);
    if (op == ReduceOp::avg) finish_average(data.type, data.data, data.count, size_);
  }

  void broadcast(Buffer data, int root, Duration timeout) override {
    const int count = count_of(data.count, "broadcast");
    const MPI_Datatype type = mpi_type(data.type);
    StagedBuffers staged(watch_, staging_);
    void* const at = (rank_ == root ? staged.read(data) : staged.write(data)).data;
    call(
        "broadcast", timeout, [&] { return MPI_Bcast(at, count, type, root, comm_); },
        [&](MPI_Request* request) { return MPI_Ibcast(at, count, type, root, comm_, request); },
        &staged);
  }

  void reduce(Buffer data, ReduceOp op, int root, Duration timeout) override {
    const int count = count_of(data.count, "reduce");
    const MPI_Datatype type = mpi_type(data.type);
    const MPI_Op reduction = mpi_op(data.type, op);
    const bool at_root = rank_ == root;
    StagedBuffers staged(watch_, staging_);
    void* const at = (at_root ? staged.update(data) : staged.read(data)).data;
    const void* send = at_root ? MPI_IN_PLACE : at;
    void* receive = at_root ? at : nullptr;
    call(
        "reduce", timeout,
        [&] { return MPI_Reduce(send, receive, count, type, reduction, root, comm_); },
        [&](MPI_Request* request) {
          return MPI_Ireduce(send, receive, count, type, reduction, root, comm_, request);
        },
        &staged);
    if (op == ReduceOp::avg && at_root) finish_average(data.type, data.data, data.count, size_);
  }

  void all_gather(Buffer input, Buffer output, Duration timeout) override {
    const int count = count_of(input.count, "all_gather");
    const MPI_Datatype type = mpi_type(input.type);
    StagedBuffers staged(watch_, staging_);
    input = staged.read(input);
    output = staged.write(output);
    const void* send = is_slice(input, output, rank_) ? MPI_IN_PLACE : input.data;
    call(
        "all_gather", timeout,
        [&] { return MPI_Allgather(send, count, type, output.data, count, type, comm_); },
        [&](MPI_Request* request) {
          return MPI_Iallgather(send, count, type, output.data, count, type, comm_, request);
        },
        &staged);
  }

  void gather(Buffer input, Buffer output, int root, Duration timeout) override {
    const int count = count_of(input.count, "gather");
    const MPI_Datatype type = mpi_type(input.type);
    const bool at_root = rank_ == root;
    StagedBuffers staged(watch_, staging_);
    input = staged.read(input);
    if (at_root) output = staged.write(output);
    const void* send = at_root && is_slice(input, output, root) ? MPI_IN_PLACE : input.data;
    void* receive = at_root ? output.data : nullptr;
    call(
        "gather", timeout,
        [&] { return MPI_Gather(send, count, type, receive, count, type, root, comm_); },
        [&](MPI_Request* request) {
          return MPI_Igather(send, count, type, receive, count, type, root, comm_, request);
        },
        &staged);
  }

  void scatter(Buffer input, Buffer output, int root, Duration timeout) override {
    const int count = count_of(output.count, "scatter");
    const MPI_Datatype type = mpi_type(output.type);
    const bool at_root = rank_ == root;
    StagedBuffers staged(watch_, staging_);
    if (at_root) input = staged.read(input);
    output = staged.write(output);
    const void* send = at_root ? input.data : nullptr;
    void* receive = at_root && is_slice(output, input, root) ? MPI_IN_PLACE : output.data;
    call(
        "scatter", timeout,
        [&] { return MPI_Scatter(send, count, type, receive, count, type, root, comm_); },
        [&](MPI_Request* request) {
          return MPI_Iscatter(send, count, type, receive, count, type, root, comm_, request);
        },
        &staged);
  }

  void reduce_scatter(Buffer input, Buffer output, ReduceOp op, Duration timeout) override {
    const int count = count_of(output.count, "reduce_scatter");
    const MPI_Datatype type = mpi_type(output.type);
    const MPI_Op reduction = mpi_op(output.type, op);
    StagedBuffers staged(watch_, staging_);
    const void* send = staged.read(input).data;
    // MPI's in-place form leaves the result at the start of the buffer, not
    // at this rank's slice: an output inside the input goes through scratch
    // (staged copies never overlap).
    std::vector<unsigned char> scratch(overlaps(input, output) && !watch_ ? output.bytes() : 0);
    void* receive = scratch.empty() ? staged.write(output).data : scratch.data();
    call(
        "reduce_scatter", timeout,
        [&] { return MPI_Reduce_scatter_block(send, receive, count, type, reduction, comm_); },
        [&](MPI_Request* request) {
          return MPI_Ireduce_scatter_block(send, receive, count, type, reduction, comm_, request);
        },
        &staged);
    if (!scratch.empty()) std::memcpy(output.data, scratch.data(), scratch.size());
    if (op == ReduceOp::avg) finish_average(output.type, output.data, output.count, size_);
  }

  void all_to_all(Buffer input, Buffer output, Duration timeout) override {
    const int count = count_of(output.count / static_cast<std::size_t>(size_), "all_to_all");
    const MPI_Datatype type = mpi_type(output.type);
    const bool in_place = input.data == output.data;
    StagedBuffers staged(watch_, staging_);
    void* const receive = (in_place ? staged.update(output) : staged.write(output)).data;
    const void* send = in_place ? MPI_IN_PLACE : staged.read(input).data;
    call(
        "all_to_all", timeout,
        [&] { return MPI_Alltoall(send, count, type, receive, count, type, comm_); },
        [&](MPI_Request* request) {
          return MPI_Ialltoall(send, count, type, receive, count, type, comm_, request);
        },
        &staged);
  }

  void barrier(Duration timeout) override {
    call(
        "barrier", timeout, [&] { return MPI_Barrier(comm_); },
        [&](MPI_Request* request) { return MPI_Ibarrier(comm_, request); });
  }

  void send(Buffer data, int peer, int tag, Duration timeout) override {
    if (peer == rank_) return mailbox_.post(data, tag);  // MPI would deadlock on itself
    const int count = count_of(data.count, "send");
    const MPI_Datatype type = mpi_type(data.type);
    check_tag("send", tag);
    StagedBuffers staged(watch_, staging_);
    const void* at = staged.read(data).data;
    call(
        "send", timeout, [&] { return MPI_Send(at, count, type, peer, tag, comm_); },
        [&](MPI_Request* request) { return MPI_Isend(at, count, type, peer, tag, comm_, request); },
        &staged);
  }

  void recv(Buffer data, int peer, int tag, Duration timeout) override {
    if (peer == rank_) return mailbox_.take(data, tag, timeout);
    const int count = count_of(data.count, "recv");
    const MPI_Datatype type = mpi_type(data.type);
    check_tag("recv", tag);
    StagedBuffers staged(watch_, staging_);
    // Copied in too: a shorter message leaves the rest of the buffer as it was.
    void* const at = staged.update(data).data;
    const std::string where = cat("recv from rank ", peer, " with tag ", tag);
    // The message is found first (a matched probe) and received only into a
    // buffer of its size: Open MPI 4.1's vader, receiving one of its
    // single-copy sizes into a smaller buffer, wrote past the buffer's end
    // before it raised MPI_ERR_TRUNCATE (from 4 KiB into 2 KiB: the
    // receiver's heap corrupted, also in a plain MPI program, 2026-12-07).
    MPI_Status status{};
    MPI_Message message = probe(peer, tag, timeout, status);
    int message_bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &message_bytes);
    if (static_cast<std::size_t>(message_bytes) != data.bytes()) {
      // Taken all the same, so that the next messages arrive as sent.
      std::vector<unsigned char> taken(static_cast<std::size_t>(message_bytes));
      call(
          "recv", timeout,
          [&] {
            return MPI_Mrecv(taken.data(), message_bytes, MPI_BYTE, &message, MPI_STATUS_IGNORE);
          },
          [&](MPI_Request* request) {
            return MPI_Imrecv(taken.data(), message_bytes, MPI_BYTE, &message, request);
          });
      throw InvalidArgument(cat(where, ": the message has ", message_bytes, " bytes, the buffer ",
                                data.bytes(),
                                "; a recv's buffer must be the size of the message sent"));
    }
    call(
        "recv", timeout, [&] { return MPI_Mrecv(at, count, type, &message, MPI_STATUS_IGNORE); },
        [&](MPI_Request* request) { return MPI_Imrecv(at, count, type, &message, request); },
        &staged);
  }

  std::unique_ptr<Backend> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    ++splits_;
    call(
        "split", timeout_,
        [&] { return MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub); },
        nullptr);
    if (sub == MPI_COMM_NULL) return nullptr;
    const std::string name = cat("split", splits_, "-color", color);
    std::shared_ptr<Store> store;
    if (store_) store = std::make_shared<PrefixStore>(name, store_);
    return std::make_unique<MpiBackend>(sub, timeout_, watch_, std::move(store),
                                        cat(group_, "-", name));
  }

 private:
  // Runs one MPI call, `blocking` in direct mode, `started` (which fills in
  // a request) in watched mode, on `staged`'s copies (staged_buffers.hpp),
  // copied back once it is done; `started` may be nullptr for calls MPI has
  // no non-blocking form of. Failures become PeerLost naming the lost rank
  // where it is known, and break the group.
  template <class Blocking, class Started>
  void call(const char* collective, Duration timeout, Blocking&& blocking, Started&& started,
            StagedBuffers* staged = nullptr) {
    if (!broken_.empty()) throw PeerLost(cat(collective, ": ", broken_), lost_rank_);
    auto lock = serialise_calls();
    if constexpr (std::is_same_v<std::decay_t<Started>, std::nullptr_t>) {
      check(collective, blocking());
    } else {
      if (!watch_) return check(collective, blocking());
      MPI_Request request = MPI_REQUEST_NULL;
      check(collective, started(&request));
      if (staged != nullptr) staged->lent();
      poll(collective, timeout,
           [&](int* done) { return MPI_Test(&request, done, MPI_STATUS_IGNORE); });
      if (staged != nullptr) staged->done();
    }
  }

  // The next message from `peer` with `tag`, matched for this rank's
  // MPI_Mrecv and its size in `status`: MPI_Mprobe in direct mode, polled
  // with MPI_Improbe in watched mode.
  MPI_Message probe(int peer, int tag, Duration timeout, MPI_Status& status) {
    if (!broken_.empty()) throw PeerLost(cat("recv: ", broken_), lost_rank_);
    auto lock = serialise_calls();
    MPI_Message message = MPI_MESSAGE_NULL;
    if (!watch_) {
      check("recv", MPI_Mprobe(peer, tag, comm_, &message, &status));
    } else {
      poll("recv", timeout,
           [&](int* found) { return MPI_Improbe(peer, tag, comm_, found, &message, &status); });
    }
    return message;
  }

  void check(const char* collective, int code) {
    if (code == MPI_SUCCESS) return;
    fail(collective, cat("MPI: ", error_text(code)), lost_peer());
  }

  // Calls `test(&done)` until it sets `done`, looking for a lost peer every
  // kCheckEvery and giving up at the deadline.
  template <class Test>
  void poll(const char* collective, Duration timeout, Test&& test) {
    const Clock::time_point deadline = Clock::now() + timeout;
    Clock::time_point next_check = Clock::now() + kCheckEvery;
    for (int done = 0, checks = 0;;) {
      check(collective, test(&done));
      if (done) return;
      const Clock::time_point now = Clock::now();
      if (now < next_check && now < deadline) {
        std::this_thread::yield();
        continue;
      }
      next_check = now + kCheckEvery;
      const bool ask_store = ++checks % kStoreEvery == 0;
      if (const int lost = seen_lost_peer(ask_store); lost >= 0) fail(collective, "", lost);
      if (now >= deadline) {
        fail(collective,
             cat("timed out after ", timeout.count(),
                 " ms with no peer known to have failed: one may be stuck, or slow (raise "
                 "COHORT_TIMEOUT)"),
             -1);
      }
    }
  }

  // After an MPI error: the rank recorded on this host, else the one to
  // blame by the kit's order (then recorded); -1 when none is known.
  int lost_peer() {
    if (const int recorded = record_.read(); recorded >= 0) return recorded;
    const int lost = store_ ? find_lost_peer(*store_, peers_, "", /*timed_out=*/false)
                            : peers_.gone_on_this_host();
    return lost >= 0 ? record_.record(lost) : -1;
  }

  // While waiting: a dead peer on this host (recorded in the store for the
  // others), else, when `ask_store`, a rank another survivor recorded; -1
  // when none. Local deaths are looked for often and first: survivors that
  // raise PeerLost and exit look dead too, and the sooner the first death is
  // seen, the less likely one of them is blamed instead.
  int seen_lost_peer(bool ask_store) {
    if (const int recorded = record_.read(); recorded >= 0) return recorded;
    int gone = peers_.gone_on_this_host();
    if (gone >= 0) gone = record_.record(gone);
    try {
      if (gone >= 0 && store_) return std::stoi(store_->compare_set("lost", "", cat(gone)));
      if (gone >= 0) return gone;
      if (ask_store && store_ && store_->check({"lost"})) {
        return std::stoi(store_->get("lost", std::chrono::milliseconds(500)));
      }
      return -1;
    } catch (const std::exception&) {
      // The store went with its host: rank 0 without a launcher, which may
      // have exited after its own PeerLost. This host's record, when there
      // is one, holds the first blame (survivors that exited since look
      // dead too); without it, another dead peer than rank 0 went first.
      if (gone < 0) return -1;
      return record_.available() ? gone : peers_.gone_on_this_host(0);
    }
  }

  [[noreturn]] void fail(const char* collective, const std::string& detail, int lost) {
    lost_rank_ = lost;
    broken_ = lost >= 0 ? cat("rank ", lost, peers_.describe(lost), " failed or left")
                        : std::string("the group is broken");
    if (!detail.empty()) broken_ += cat(" (", detail, ")");
    const std::string where = cat(collective, " on rank ", rank_, " of ", size_);
    if (lost < 0 && detail.rfind("timed out", 0) == 0) {
      throw Timeout(cat(where, " ", detail, "; the communicator is unusable after it"));
    }
    throw PeerLost(cat(where, ": ", broken_), lost);
  }

  void check_tag(const char* operation, int tag) const {
    if (tag < 0 || tag > tag_bound_) {
      throw InvalidArgument(cat(operation, ": tag ", tag, " is outside what MPI allows (0 to ",
                                tag_bound_, ", MPI_TAG_UB)"));
    }
  }

  // Every rank's "host pid", for naming a dead local peer.
  Peers exchange_peers() {
    constexpr int kEntry = 320;
    char mine[kEntry] = {};
    const std::string entry = Peers::entry();
    entry.copy(mine, kEntry - 1);  // the rest stays zero: a terminated string
    std::vector<char> all(static_cast<std::size_t>(kEntry) * static_cast<std::size_t>(size_));
    auto lock = serialise_calls();
    MPI_Allgather(mine, kEntry, MPI_CHAR, all.data(), kEntry, MPI_CHAR, comm_);
    std::vector<std::string> entries;
    entries.reserve(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r)
      entries.emplace_back(all.data() + static_cast<std::size_t>(r) * kEntry);
    return Peers(rank_, entries);
  }

  MPI_Comm comm_;
  Duration timeout_;
  bool watch_;
  std::shared_ptr<Store> store_;  // for the "lost" record; may be null
  std::string group_;
  LostRecord record_;
  int rank_ = 0;
  int size_ = 1;
  int tag_bound_ = 32767;
  Peers peers_{0, {}};
  int splits_ = 0;
  std::string broken_;
  int lost_rank_ = -1;
  LocalMailbox mailbox_;
  StagingPool staging_;
};

}  // namespace

std::string unviable_because(const BackendContext& context) {
  // The launchers whose ranks this build's MPI library can be initialised in.
#if defined(OMPI_MAJOR_VERSION)
  constexpr unsigned kThisMpi = kOpenMpi;
#elif defined(MPICH_VERSION)
  constexpr unsigned kThisMpi = kMpich;
#else
  constexpr unsigned kThisMpi = kOpenMpi | kMpich;
#endif
  const Launcher launcher = context.info->launcher.value;
  if ((launcher_entry(launcher).starts_mpi & kThisMpi) != 0) return runtime_unusable_because();
  std::vector<std::string> starters;
  for (const LauncherEntry& entry : launchers()) {
    if ((entry.starts_mpi & kThisMpi) != 0) starters.emplace_back(entry.description);
  }
  return cat("it needs a job started by ", join(starters, " or "), " (this build's MPI is ",
             library_name(), "); this process was started by ", launcher_description(launcher));
}

std::unique_ptr<Communicator> create(const BackendContext& context) {
  ensure_initialised();
  int world_rank = 0, world_size = 0;
  MPI_Comm comm = MPI_COMM_NULL;
  {
    auto lock = serialise_calls();
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    const LaunchInfo& info = *context.info;
    if (world_rank != info.rank.value || world_size != info.world_size.value) {
      throw Error(cat("MPI says this is rank ", world_rank, " of ", world_size,
                      ", the launch environment rank ", info.rank.value, " (", info.rank.source,
                      ") of ", info.world_size.value, " (", info.world_size.source,
                      "): the process was not started by the mpirun of ", library_name(),
                      "; start it with that one, or use COHORT_BACKEND=gloo"));
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  }
  // Communicators of the world are made in the same order on every rank.
  static int worlds = 0;
  const std::string group = cat("world", ++worlds);
  std::shared_ptr<Store> store;
  if (context.store) store = std::make_shared<PrefixStore>("comm/mpi/" + group, context.store);
  return std::make_unique<Communicator>(
      std::make_unique<MpiBackend>(comm, context.timeout, watched(), std::move(store), group));
}

}  // namespace cohort::detail::mpi_backend
