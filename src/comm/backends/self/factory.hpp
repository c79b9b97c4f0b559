// The `self` backend: a group of one rank. Every collective is a local copy
// (or nothing), checked exactly like a real backend's, so programs run
// unchanged as a single process and no other code special-cases world size 1.
#pragma once

#include <memory>
#include <string>

#include <cohort/communicator.hpp>

#include "comm/backend_context.hpp"

namespace cohort::detail::self_backend {

/// Empty for a world of one; else why not.
std::string unviable_because(const BackendContext& context);

/// A communicator for a group of one with the context's timeout as its default.
std::unique_ptr<Communicator> create(const BackendContext& context);

}  // namespace cohort::detail::self_backend
