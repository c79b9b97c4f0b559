// What a backend that connects its ranks through the job's store shares
// with every other such backend: who belongs to a `split` subgroup, and
// whether every rank is done before a group closes.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include <cohort/store.hpp>

namespace cohort::detail {

/// One rank's place in a subgroup made by split().
struct Subgroup {
  int rank = 0;
  int size = 0;
  /// The subgroup's own view of the store (no other group shares it).
  std::shared_ptr<Store> store;
};

/// Collective over the parent group (`rank` of `size`): every rank publishes
/// (color, key) under "split/<round>/" and reads the others'; the members of
/// this rank's color are ordered by key, then rank. `round` counts the
/// parent's splits (the same on every rank). std::nullopt for a negative
/// color (after publishing: the others wait for it).
std::optional<Subgroup> plan_split(const std::shared_ptr<Store>& store, int round, int rank,
                                   int size, int color, int key, std::chrono::milliseconds timeout);

/// Marks this rank done and waits up to `wait` for every other rank to be:
/// true when they all were. A rank that closes its connections while a peer
/// still reads from them can cost the peer its last message; a backend that
/// closes quickly only does so after this. Never throws.
bool everyone_done(Store& store, int rank, int size, std::chrono::milliseconds wait) noexcept;

}  // namespace cohort::detail
