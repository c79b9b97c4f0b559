// The buffers of a watched call (COHORT_MPI_WATCH=1). A watched call gives
// up at its deadline or when a peer is lost, but MPI cannot cancel a
// collective: its request stays pending, and MPI may still read and write
// the call's buffers in any later MPI call of the process (another
// communicator's, MPI_Finalize at exit). So a watched call works on copies
// the backend owns, copied in before it starts and out once it is done; a
// call that gives up leaves its copies to MPI for good (kept, never freed,
// until the process ends) and the caller's buffers are the caller's again.
// Blocking calls (not watched) never give up: they take the caller's
// buffers themselves.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include <cohort/communicator.hpp>

namespace cohort::detail::mpi_backend {

/// A communicator's copies between its calls, for the next call to reuse
/// (a large buffer allocated anew every call would be faulted in anew).
class StagingPool {
 public:
  struct Bytes {
    std::unique_ptr<unsigned char[]> data;
    std::size_t capacity = 0;
  };
  /// A buffer of at least `bytes`: a kept one, else a new one.
  Bytes take(std::size_t bytes);
  /// Keeps `bytes` for a later call (the two largest are kept).
  void give(Bytes bytes);

 private:
  std::mutex mutex_;
  std::vector<Bytes> spare_;
};

/// One call's copies. Without `watched`, every buffer is the caller's own.
class StagedBuffers {
 public:
  StagedBuffers(bool watched, StagingPool& pool) noexcept : watched_(watched), pool_(pool) {}
  StagedBuffers(const StagedBuffers&) = delete;
  StagedBuffers& operator=(const StagedBuffers&) = delete;
  /// Gives the copies back to the pool, or, when MPI was given them and
  /// the call did not end (lent() without done()), to MPI for good.
  ~StagedBuffers();

  /// The buffer the call passes to MPI for `caller`, which MPI reads
  /// (copied in), writes (copied out at done()), or both.
  Buffer read(Buffer caller) { return stage(caller, true, false); }
  Buffer write(Buffer caller) { return stage(caller, false, true); }
  Buffer update(Buffer caller) { return stage(caller, true, true); }

  /// MPI has the copies (the call's request started).
  void lent() noexcept { lent_ = true; }
  /// The call ended: what MPI wrote, into the caller's buffers.
  void done() noexcept;

 private:
  struct Copy {
    Buffer caller;
    StagingPool::Bytes bytes;
    bool out = false;
  };
  Buffer stage(Buffer caller, bool in, bool out);

  bool watched_;
  StagingPool& pool_;
  std::vector<Copy> copies_;
  bool lent_ = false;
  bool done_ = false;
};

}  // namespace cohort::detail::mpi_backend
