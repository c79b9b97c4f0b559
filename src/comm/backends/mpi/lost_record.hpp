// The first blame of a group, kept in a file on this host that outlives the
// ranks: Open MPI's per-job session directory (private to the user, removed
// by mpirun when the job ends). The job's store cannot serve: without a
// launcher it lives in rank 0, which may exit after its own PeerLost, and a
// survivor that looks later would take the exited survivors for the dead.
#pragma once

#include <string>

namespace cohort::detail::mpi_backend {

class LostRecord {
 public:
  /// The record of group `group` (the same name on every rank), in the
  /// session directory Open MPI names in the environment; none without one.
  explicit LostRecord(const std::string& group);

  bool available() const { return !path_.empty(); }
  /// The rank recorded first, or -1.
  int read() const;
  /// Records `rank` unless a rank is recorded already; returns the one that is.
  int record(int rank) const;

 private:
  std::string path_;
};

}  // namespace cohort::detail::mpi_backend
