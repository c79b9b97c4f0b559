// Every participant's value, to every participant, through the job's store
// in O(size) requests: the agents' join (launch/node_group) and the ranks'
// host identities (comm/kit). Waiting for every participant's key instead
// costs size² key waits, which does not scale (docs/rendezvous.md).
#pragma once

#include <chrono>
#include <cstddef>
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
/// stretches are as long as they can be: one plain encoding per table.
///
/// An encoding of kCompressTablesFrom bytes or more travels compressed
/// where that makes it at least an eighth smaller: the 4 bytes FF FF FF FF,
/// then one zstd frame of it that says its size. A table of 100,000 agents'
/// entries (ranks, host, pid, node, address) is then 3.4 times smaller, in
/// the job's store, on every hop of the agents' tree and in each node's
/// copy (docs/rendezvous.md); values that do not compress travel as they
/// are.
std::string encode_table(const std::vector<std::string>& values);
/// nullopt unless `table` is exactly `size` such values (a compressed one
/// at most kMaxTableBytes once decompressed).
std::optional<std::vector<std::string>> decode_table(std::string_view table, int size);

/// Below this an encoding travels as it is. A node's copy of a smaller
/// table is cheap whatever its form, and one compressed under the store's
/// large answers (kLargeAnswerBytes) goes to each rank as a copy instead of
/// as its node's one file: compressed from 64 KiB, the host table of
/// 16,384 ranks, 8 a node (90 KB, 20 KB compressed), took the bench's
/// hosts pattern 0.74 s against 0.61-0.63 s (docs/rendezvous.md).
inline constexpr std::size_t kCompressTablesFrom = std::size_t{256} << 10;
/// The largest table an exchange makes or takes compressed (a bound on
/// what a compressed table may claim to hold).
inline constexpr std::size_t kMaxTableBytes = std::size_t{1} << 30;

}  // namespace cohort::detail
