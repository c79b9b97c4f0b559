// The `self` backend: a group of one rank. Every collective is a local copy
// (or nothing), checked exactly like a real backend's, so programs run
// unchanged as a single process and no other code special-cases world size 1.
#pragma once

#include <memory>

#include <cohort/communicator.hpp>

namespace cohort::detail::self_backend {

/// A communicator for a group of one with `timeout` as its default.
std::unique_ptr<Communicator> create(Communicator::Duration timeout);

}  // namespace cohort::detail::self_backend
