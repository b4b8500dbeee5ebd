#include "mpi_types.hpp"

#include <cstdint>
#include <limits>
#include <set>
#include <type_traits>

#include "../detail/reduce.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/half.hpp"

namespace shardwise::detail {
namespace {

template <DType D, ReduceOp O>
void reduce_half(void* in, void* inout, int* length, MPI_Datatype*) {
  reduce_into({inout, in}, inout, static_cast<std::size_t>(*length), D,
              O == ReduceOp::kAvg ? ReduceOp::kSum : O);
}

template <DType D>
void register_half_ops(std::map<std::pair<DType, ReduceOp>, MPI_Op>& ops) {
  MPI_Op_create(&reduce_half<D, ReduceOp::kSum>, 1, &ops[{D, ReduceOp::kSum}]);
  ops[{D, ReduceOp::kAvg}] = ops[{D, ReduceOp::kSum}];
  MPI_Op_create(&reduce_half<D, ReduceOp::kMax>, 1, &ops[{D, ReduceOp::kMax}]);
  MPI_Op_create(&reduce_half<D, ReduceOp::kMin>, 1, &ops[{D, ReduceOp::kMin}]);
}

}  // namespace

MpiTypes::MpiTypes() {
  MPI_Type_contiguous(2, MPI_BYTE, &half_);
  MPI_Type_commit(&half_);
  register_half_ops<DType::kBF16>(half_ops_);
  register_half_ops<DType::kF16>(half_ops_);
}

MpiTypes::~MpiTypes() {
  // avg shares sum's operation: free each handle once.
  std::set<MPI_Op> distinct;
  for (const auto& [key, op] : half_ops_) distinct.insert(op);
  for (MPI_Op op : distinct) MPI_Op_free(&op);
  MPI_Type_free(&half_);
}

MPI_Datatype MpiTypes::type(DType dtype) const {
  switch (dtype) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    case DType::kU8: return MPI_UINT8_T;
    case DType::kI8: return MPI_INT8_T;
    case DType::kBool: return MPI_UINT8_T;
    case DType::kBF16:
    case DType::kF16: return half_;
  }
  return MPI_BYTE;
}

MPI_Op MpiTypes::reduction(DType dtype, ReduceOp op) const {
  if (dtype == DType::kBF16 || dtype == DType::kF16) return half_ops_.at({dtype, op});
  if (dtype == DType::kBool) return op == ReduceOp::kMin ? MPI_LAND : MPI_LOR;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  return MPI_SUM;
}

int mpi_count(std::size_t count) {
  if (count > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw InvalidArgument("count " + std::to_string(count) + " exceeds MPI's int counts");
  }
  return static_cast<int>(count);
}

void divide(void* data, std::size_t count, DType dtype, int n) {
  auto scale = [&](auto* values) {
    using T = std::remove_pointer_t<decltype(values)>;
    for (std::size_t e = 0; e < count; ++e) values[e] = static_cast<T>(values[e] / n);
  };
  auto scale_half = [&](auto* values, auto convert) {
    for (std::size_t e = 0; e < count; ++e) {
      values[e] = convert(to_float(values[e]) / static_cast<float>(n));
    }
  };
  switch (dtype) {
    case DType::kF32: scale(static_cast<float*>(data)); break;
    case DType::kF64: scale(static_cast<double*>(data)); break;
    case DType::kI32: scale(static_cast<std::int32_t*>(data)); break;
    case DType::kI64: scale(static_cast<std::int64_t*>(data)); break;
    case DType::kU8: scale(static_cast<std::uint8_t*>(data)); break;
    case DType::kI8: scale(static_cast<std::int8_t*>(data)); break;
    case DType::kBool: break;  // avg of bools is refused before any data moves
    case DType::kBF16: scale_half(static_cast<BFloat16*>(data), to_bfloat16); break;
    case DType::kF16: scale_half(static_cast<Float16*>(data), to_float16); break;
  }
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

}  // namespace shardwise::detail
