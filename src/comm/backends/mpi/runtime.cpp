#include "comm/backends/mpi/runtime.hpp"

#include <cstdlib>
#include <string_view>

#include <mpi.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail::mpi_backend {
namespace {

std::string level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    default:
      return "MPI_THREAD_MULTIPLE";
  }
}

int provided_level = MPI_THREAD_MULTIPLE;  // set once, under std::call_once
std::mutex calls;

// MPI_THREAD_MULTIPLE: communicators' queue threads may be in MPI at once.
// COHORT_MPI_THREAD_LEVEL=serialized asks for less (Open MPI then takes no
// locks: 0.35 us less per small call here), and cohort serialises its own
// calls, for programs that never overlap operations of two communicators.
int level_to_ask() {
  const char* asked = std::getenv("COHORT_MPI_THREAD_LEVEL");
  if (asked == nullptr || std::string_view(asked) == "multiple") return MPI_THREAD_MULTIPLE;
  if (std::string_view(asked) == "serialized") return MPI_THREAD_SERIALIZED;
  throw InvalidArgument(cat("COHORT_MPI_THREAD_LEVEL='", asked,
                            "' is not a thread level cohort can ask MPI for: use multiple (the "
                            "default) or serialized"));
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

std::string runtime_unusable_because() {
  int finalized = 0, initialised = 0;
  MPI_Finalized(&finalized);
  if (finalized) return "MPI was finalized already in this process";
  MPI_Initialized(&initialised);
  if (!initialised) return {};
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_SERIALIZED) {
    return cat("the program initialised MPI with ", level_name(level),
               "; cohort calls MPI from its own threads too and needs MPI_THREAD_SERIALIZED or "
               "MPI_THREAD_MULTIPLE (MPI_Init_thread)");
  }
  return {};
}

void ensure_initialised() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (const std::string why = runtime_unusable_because(); !why.empty()) throw Error(why);
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised) {
      MPI_Query_thread(&provided_level);
      return;
    }
    if (MPI_Init_thread(nullptr, nullptr, level_to_ask(), &provided_level) != MPI_SUCCESS) {
      throw Error(cat("MPI_Init_thread failed (", library_name(), ")"));
    }
    std::atexit(finalize_at_exit);
    if (provided_level < MPI_THREAD_SERIALIZED) {
      throw Error(cat(library_name(), " gives only ", level_name(provided_level),
                      "; cohort needs MPI_THREAD_SERIALIZED at least"));
    }
  });
}

std::unique_lock<std::mutex> serialise_calls() {
  if (provided_level >= MPI_THREAD_MULTIPLE) return {};
  return std::unique_lock<std::mutex>(calls);
}

std::string library_name() {
#if defined(OMPI_MAJOR_VERSION)
  return cat("Open MPI ", OMPI_MAJOR_VERSION, ".", OMPI_MINOR_VERSION, ".", OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
  return cat("MPICH ", MPICH_VERSION);
#else
  return "MPI";
#endif
}

}  // namespace cohort::detail::mpi_backend

#if defined(__SANITIZE_ADDRESS__)
// Open MPI 4.1 keeps a few kilobytes from MPI_Init, many of them in
// components it unloads at MPI_Finalize, where LeakSanitizer can neither name
// nor suppress them. A process that used MPI is not leak-checked; every other
// one is (every test outside mpirun). MPI_Initialized stays true after
// MPI_Finalize, and may be called at any time.
extern "C" int __lsan_is_turned_off() {  // NOLINT: the sanitizer's hook
  int initialised = 0;
  MPI_Initialized(&initialised);
  return initialised;
}
#endif
