// The master port every rank of a job computes alike when nobody set
// MASTER_PORT (docs/launch-env.md, "Master address and port"):
//
//   port = 12000 + (job × 32 + step mod 32) mod 20000
//
// job is the job id when it is a number, else its 64-bit FNV-1a hash; step is
// the Slurm step id (0 outside a step). The range 12000–31999 is unprivileged
// and lies below Linux's ephemeral range (32768–60999), so the kernel never
// hands the port to an outgoing connection. Two steps of one job get
// different ports, and so do any two of 625 consecutive jobs.
#pragma once

#include <cstdint>
#include <string_view>

namespace cohort::detail {

inline constexpr int kDerivedPortBase = 12000;
inline constexpr int kDerivedPortCount = 20000;

int derive_port(std::string_view job_id, std::uint64_t step) noexcept;

}  // namespace cohort::detail
