// cohort's element types and reductions as MPI's. f16 and bf16 travel as
// 16-bit integers and reduce through user-defined ops (cohort's own
// reduce_into: computed in float, rounded back), as MPI has no such types.
#pragma once

#include <mpi.h>

#include <cohort/communicator.hpp>

namespace cohort::detail::mpi_backend {

/// The MPI datatype that moves elements of `type`.
MPI_Datatype mpi_type(DataType type) noexcept;

/// The MPI op that reduces `type` by `op` (avg: the sum; divide afterwards).
/// Needs MPI initialised (the f16/bf16 ops are created on first use).
MPI_Op mpi_op(DataType type, ReduceOp op);

}  // namespace cohort::detail::mpi_backend
