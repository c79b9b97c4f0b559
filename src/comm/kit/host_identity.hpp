// Which ranks share a machine, told by what the kernel says rather than by
// host names (two containers, or two network namespaces of a test cluster,
// may share a name; one host may have several): the boot id of the running
// kernel and the network namespace this process lives in. Ranks with equal
// identities can share memory and reach each other's abstract Unix sockets.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <cohort/store.hpp>

namespace cohort::detail {

/// gethostname(), or "?".
std::string this_host_name();

/// "<hostname> <boot id> <network namespace>", short, as every rank of a job
/// reads every host's: the boot id's first 16 hex digits (64 random bits
/// tell machines apart) and the namespace's inode number, e.g.
/// "node3 6f1c2a9e0b7d4c31 4026531840".
std::string host_identity();

/// Collective over `size` ranks: publishes this rank's host_identity() under
/// "host/<rank>" and returns every rank's, indexed by rank, through one table
/// (store/exchange.hpp).
std::vector<std::string> exchange_host_identities(Store& store, int rank, int size,
                                                  std::chrono::milliseconds timeout);

/// The host name part of an identity (for messages).
std::string host_name_of(const std::string& identity);

/// How many of `identities` run on the same kernel (boot id) as
/// identities[rank], itself included: more than the ranks of its own host
/// where hosts are network namespaces or containers of one machine, which
/// share its CPUs. 1 when that rank's boot id is unknown.
int ranks_on_same_machine(const std::vector<std::string>& identities, int rank);

}  // namespace cohort::detail
