// Every participant's value, to every participant, through the job's store
// in O(size) requests: the agents' join (launch/node_group) and the ranks'
// host identities (comm/kit). Waiting for every participant's key instead
// costs size² key waits, which does not scale (docs/rendezvous.md).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cohort/store.hpp>

namespace cohort::detail {

/// Sets `<prefix>/<rank>` to `value` and counts this participant in
/// (`<prefix>/arrived`); the last of `size` to arrive reads every value and
/// publishes them as one table (`<prefix>/table`), which every participant
/// waits for and reads. Returns the values in rank order. One exchange per
/// prefix and store. Throws cohort::Timeout when the table is not there
/// within `timeout` (a participant missing: check which `<prefix>/<rank>`
/// keys are unset), cohort::Error when the table cannot be read.
std::vector<std::string> exchange_values(Store& store, std::string_view prefix, int rank, int size,
                                         const std::string& value,
                                         std::chrono::milliseconds timeout);

/// The key of `rank`'s value in an exchange under `prefix`.
std::string exchanged_key(std::string_view prefix, int rank);
/// Every rank's key under `prefix`, ranks 0 to `count` - 1: what one
/// Store::multi_get asks for when every rank set its own.
std::vector<std::string> ranked_keys(std::string_view prefix, std::size_t count);

/// The table's encoding, every number 4-byte little-endian: how many
/// distinct values, each as its length and bytes in the order first used,
/// then how many stretches, and each stretch as three numbers: the index
/// of its first value, how many participants hold each value, and how many
/// values in a row (indexes first, first + 1, ...), participants in rank
/// order. Values that repeat travel once, and ranks numbered node by node,
/// as every launcher numbers them, make one stretch: the host table that
/// every rank of a job reads is one identity per host and 16 bytes, and a
/// table of distinct values one per participant and 16 bytes. Runs and
/// stretches are as long as they can be: one encoding per table.
std::string encode_table(const std::vector<std::string>& values);
/// nullopt unless `table` is exactly `size` such values.
std::optional<std::vector<std::string>> decode_table(std::string_view table, int size);

}  // namespace cohort::detail
