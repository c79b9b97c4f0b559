#include "comm/backends/mpi/element_types.hpp"

#include <mutex>

#include "comm/reduce.hpp"

namespace cohort::detail::mpi_backend {
namespace {

// MPI's signature for a user op: inout[i] = in[i] op inout[i].
template <DataType Type, ReduceOp Operation>
void user_op(void* in, void* inout, int* length, MPI_Datatype*) {
  reduce_into(Type, Operation, inout, in, static_cast<std::size_t>(*length));
}

template <DataType Type>
MPI_Op create_op(ReduceOp op) {
  MPI_User_function* function = nullptr;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      function = user_op<Type, ReduceOp::sum>;
      break;
    case ReduceOp::prod:
      function = user_op<Type, ReduceOp::prod>;
      break;
    case ReduceOp::min:
      function = user_op<Type, ReduceOp::min>;
      break;
    case ReduceOp::max:
      function = user_op<Type, ReduceOp::max>;
      break;
  }
  MPI_Op created = MPI_OP_NULL;
  MPI_Op_create(function, /*commute=*/1, &created);
  return created;
}

}  // namespace

MPI_Datatype mpi_type(DataType type) noexcept {
  switch (type) {
    case DataType::f32:
      return MPI_FLOAT;
    case DataType::f64:
      return MPI_DOUBLE;
    case DataType::i8:
      return MPI_INT8_T;
    case DataType::u8:
      return MPI_UINT8_T;
    case DataType::i32:
      return MPI_INT32_T;
    case DataType::i64:
      return MPI_INT64_T;
    case DataType::f16:
    case DataType::bf16:
      break;
  }
  return MPI_UINT16_T;
}

MPI_Op mpi_op(DataType type, ReduceOp op) {
  if (type == DataType::f16 || type == DataType::bf16) {
    // One op per (type, op), made once: [f16, bf16] x [sum, prod, min, max, avg].
    static std::once_flag once;
    static MPI_Op ops[2][5];
    std::call_once(once, [] {
      for (ReduceOp each :
           {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
        ops[0][static_cast<int>(each)] = create_op<DataType::f16>(each);
        ops[1][static_cast<int>(each)] = create_op<DataType::bf16>(each);
      }
    });
    return ops[type == DataType::f16 ? 0 : 1][static_cast<int>(op)];
  }
  switch (op) {
    case ReduceOp::prod:
      return MPI_PROD;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::sum:
    case ReduceOp::avg:
      break;
  }
  return MPI_SUM;
}

}  // namespace cohort::detail::mpi_backend
