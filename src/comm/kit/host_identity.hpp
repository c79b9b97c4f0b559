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

/// "<hostname> <boot id> <network namespace>", e.g.
/// "node3 6f1c…-… net:[4026531840]".
std::string host_identity();

/// Collective over `size` ranks: publishes this rank's host_identity() under
/// "host/<rank>" and returns every rank's, indexed by rank, through one table
/// (store/exchange.hpp).
std::vector<std::string> exchange_host_identities(Store& store, int rank, int size,
                                                  std::chrono::milliseconds timeout);

/// The host name part of an identity (for messages).
std::string host_name_of(const std::string& identity);

}  // namespace cohort::detail
