#include "comm/backends/mpi/lost_record.hpp"

#include <cstdlib>
#include <fstream>

#include <fcntl.h>
#include <unistd.h>

#include "core/strings.hpp"

namespace cohort::detail::mpi_backend {

LostRecord::LostRecord(const std::string& group) {
  // Set by Open MPI's mpirun for every rank: /tmp/ompi.<host>.<uid>/pid.<mpirun pid>.
  if (const char* dir = std::getenv("OMPI_MCA_orte_jobfam_session_dir"); dir && *dir) {
    path_ = cat(dir, "/cohort-lost-", group);
  }
}

int LostRecord::read() const {
  if (path_.empty()) return -1;
  std::ifstream file(path_);
  int rank = -1;
  return file >> rank ? rank : -1;
}

int LostRecord::record(int rank) const {
  if (path_.empty()) return rank;
  // Written whole under another name, then linked: link() fails when the
  // record exists, so the first writer wins and no reader sees half of it.
  const std::string draft = cat(path_, ".", ::getpid());
  {
    std::ofstream file(draft);
    file << rank << "\n";
  }
  (void)::link(draft.c_str(), path_.c_str());
  ::unlink(draft.c_str());
  const int recorded = read();
  return recorded >= 0 ? recorded : rank;
}

}  // namespace cohort::detail::mpi_backend
