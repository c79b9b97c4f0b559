// A library loaded when a process first needs it (dlopen), not at its start:
// for optional dependencies that only some jobs use (PMIx under mpirun and
// srun --mpi=pmix, MUNGE under Slurm) and whose load, with their own
// dependencies, would cost every cohort process's start (libpmix brings
// libevent, hwloc and libudev: about 1 ms of 14 for `cohort run -n 1`).
#pragma once

#include <string>

namespace cohort::detail {

class SharedLibrary {
 public:
  /// Loads `path` (an absolute file name with the library's soname) with
  /// RTLD_NOW | RTLD_LOCAL. Throws cohort::Error naming the file, what it
  /// is `needed_for`, and the Debian `package` that installs it. Never
  /// unloaded: the libraries register exit handlers and keep threads.
  SharedLibrary(std::string path, const std::string& needed_for, const std::string& package);

  /// The function `name` of the library as a pointer to `Function` (the
  /// type its header declares: `decltype(PMIx_Init)`). Throws cohort::Error
  /// naming the symbol and the file when the library lacks it.
  template <class Function>
  Function* function(const char* name) const {
    return reinterpret_cast<Function*>(address_of(name));
  }

 private:
  void* address_of(const char* name) const;

  std::string path_;
  void* handle_ = nullptr;
};

}  // namespace cohort::detail

/// The function its header declares as `name`, from `library` (a
/// SharedLibrary): `COHORT_LIBRARY_FUNCTION(library, PMIx_Init)`.
#define COHORT_LIBRARY_FUNCTION(library, name) (library).function<decltype(name)>(#name)
