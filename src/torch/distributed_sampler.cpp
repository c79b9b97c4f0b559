#include <algorithm>
#include <numeric>
#include <random>

#include <cohort/errors.hpp>
#include <cohort/torch.hpp>

#include "core/strings.hpp"

namespace cohort::torch {

DistributedSampler::DistributedSampler(std::size_t dataset_size, int rank, int world_size,
                                       bool shuffle, std::uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      rank_(rank),
      world_size_(world_size),
      shuffle_(shuffle),
      seed_(seed) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw InvalidArgument(detail::cat("DistributedSampler: rank ", rank, " of world size ",
                                      world_size, " is not a rank of that world"));
  }
  const auto world = static_cast<std::size_t>(world_size);
  per_rank_ = drop_last ? dataset_size / world : (dataset_size + world - 1) / world;
}

std::vector<std::size_t> DistributedSampler::indices() const {
  std::vector<std::size_t> order(dataset_size_);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (shuffle_) {
    // The same permutation on every rank: seeded by the seed and the epoch only.
    std::mt19937_64 random(seed_ * 1000003u + epoch_);
    std::shuffle(order.begin(), order.end(), random);
  }
  const std::size_t total = per_rank_ * static_cast<std::size_t>(world_size_);
  // Pad by repeating from the start (or cut, with drop_last).
  for (std::size_t i = 0; order.size() < total && dataset_size_ > 0; ++i)
    order.push_back(order[i % dataset_size_]);
  order.resize(total);
  std::vector<std::size_t> mine;
  mine.reserve(per_rank_);
  for (std::size_t i = static_cast<std::size_t>(rank_); i < total;
       i += static_cast<std::size_t>(world_size_))
    mine.push_back(order[i]);
  return mine;
}

}  // namespace cohort::torch
