// PMIx, as Open MPI's mpirun (4.x, through its PMIx server) and srun
// --mpi=pmix provide it: rank 0 puts its address, a fence with data
// collection spreads it, every rank gets it.
#include <cstdlib>
#include <cstring>

#include <pmix.h>

#include <cohort/errors.hpp>

#include "bootstrap/master_exchange.hpp"
#include "core/shared_library.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

constexpr const char* kKey = "cohort.master";

// libpmix, loaded by the first process that asks PMIx (and then kept): the
// calls below, and those pmix.h's macros would make.
struct Pmix {
  SharedLibrary library{COHORT_PMIX_LIBRARY, "finding rank 0 through PMIx",
                        COHORT_PMIX_LIBRARY_PACKAGE};
  decltype(PMIx_Init)* init = COHORT_LIBRARY_FUNCTION(library, PMIx_Init);
  decltype(PMIx_Finalize)* finalize = COHORT_LIBRARY_FUNCTION(library, PMIx_Finalize);
  decltype(PMIx_Error_string)* error_string = COHORT_LIBRARY_FUNCTION(library, PMIx_Error_string);
  decltype(PMIx_Put)* put = COHORT_LIBRARY_FUNCTION(library, PMIx_Put);
  decltype(PMIx_Commit)* commit = COHORT_LIBRARY_FUNCTION(library, PMIx_Commit);
  decltype(PMIx_Fence)* fence = COHORT_LIBRARY_FUNCTION(library, PMIx_Fence);
  decltype(PMIx_Get)* get = COHORT_LIBRARY_FUNCTION(library, PMIx_Get);
  decltype(PMIx_Info_load)* info_load = COHORT_LIBRARY_FUNCTION(library, PMIx_Info_load);
  decltype(PMIx_Value_destruct)* value_destruct =
      COHORT_LIBRARY_FUNCTION(library, PMIx_Value_destruct);
};

const Pmix& pmix() {
  static const Pmix kPmix;
  return kPmix;
}

[[noreturn]] void fail(const char* call, pmix_status_t status) {
  throw Error(cat("PMIx: ", call, " failed: ", pmix().error_string(status),
                  " (is this process started by mpirun or srun --mpi=pmix?)"));
}

}  // namespace

MasterAddress exchange_over_pmix(int rank, const MasterAddress& mine) {
  const Pmix& p = pmix();
  pmix_proc_t self;
  if (pmix_status_t status = p.init(&self, nullptr, 0); status != PMIX_SUCCESS) {
    fail("PMIx_Init", status);
  }
  // Finalized at exit, not now: a PMIx client finalized and then initialised
  // again (MPI_Init does, for the mpi backend) no longer finds its job's
  // data on a node of several (Open MPI 4.1: "getting local rank failed").
  // Kept open, MPI's own PMIx_Init only counts one more user of it.
  static const bool kFinalizeAtExit = [] {
    return std::atexit([] { pmix().finalize(nullptr, 0); }) == 0;
  }();
  (void)kFinalizeAtExit;
  const std::string text = encode_master(mine);
  if (rank == 0) {
    pmix_value_t value;
    std::memset(&value, 0, sizeof(value));
    value.type = PMIX_STRING;
    value.data.string = const_cast<char*>(text.c_str());
    if (pmix_status_t status = p.put(PMIX_GLOBAL, kKey, &value); status != PMIX_SUCCESS) {
      fail("PMIx_Put", status);
    }
    if (pmix_status_t status = p.commit(); status != PMIX_SUCCESS) fail("PMIx_Commit", status);
  }
  pmix_info_t collect;
  PMIX_INFO_CONSTRUCT(&collect);
  bool yes = true;
  p.info_load(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
  pmix_proc_t everyone;
  PMIX_PROC_CONSTRUCT(&everyone);
  PMIX_LOAD_PROCID(&everyone, self.nspace, PMIX_RANK_WILDCARD);
  const pmix_status_t fenced = p.fence(&everyone, 1, &collect, 1);
  p.value_destruct(&collect.value);
  if (fenced != PMIX_SUCCESS) fail("PMIx_Fence", fenced);
  if (rank == 0) return mine;

  pmix_proc_t root;
  PMIX_PROC_CONSTRUCT(&root);
  PMIX_LOAD_PROCID(&root, self.nspace, 0);
  pmix_value_t* value = nullptr;
  if (pmix_status_t status = p.get(&root, kKey, nullptr, 0, &value); status != PMIX_SUCCESS) {
    fail("PMIx_Get", status);
  }
  std::string published = value->type == PMIX_STRING && value->data.string != nullptr
                              ? value->data.string
                              : std::string();
  p.value_destruct(value);
  std::free(value);
  auto master = decode_master(published);
  if (!master) {
    throw Error(cat("PMIx: rank 0 published '", published,
                    "', expected host:port/token (do all ranks run the same cohort?)"));
  }
  return *master;
}

}  // namespace cohort::detail

#if defined(__SANITIZE_ADDRESS__)
// libpmix 4.2 keeps a few bytes from PMIx_Init and PMIx_Put that PMIx_Finalize
// never frees: not ours to fix, and not to hide a leak of ours behind.
extern "C" const char* __lsan_default_suppressions() {  // NOLINT: the sanitizer's hook
  return "leak:libpmix.so\n";
}
#endif
