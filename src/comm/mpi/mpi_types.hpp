#pragma once
// MPI's view of shardwise's dtypes and reductions, shared by every communicator of a process.

#include <mpi.h>

#include <cstddef>
#include <map>
#include <string>
#include <utility>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/placement.hpp"

namespace shardwise::detail {

class MpiTypes {
 public:
  MpiTypes();
  ~MpiTypes();
  MpiTypes(const MpiTypes&) = delete;
  MpiTypes& operator=(const MpiTypes&) = delete;
  MpiTypes(MpiTypes&&) = delete;
  MpiTypes& operator=(MpiTypes&&) = delete;

  // 16-bit floats travel as two bytes and reduce in f32 through user operations; bool as one
  // byte reducing with logical or (sum, max) and and (min).
  [[nodiscard]] MPI_Datatype type(DType dtype) const;
  [[nodiscard]] MPI_Op reduction(DType dtype, ReduceOp op) const;

 private:
  MPI_Datatype half_ = MPI_DATATYPE_NULL;
  std::map<std::pair<DType, ReduceOp>, MPI_Op> half_ops_;
};

// MPI takes int counts; a larger count is an InvalidArgument.
int mpi_count(std::size_t count);

// avg = sum / n after a sum: integers truncate, 16-bit floats divide in f32 and round back.
void divide(void* data, std::size_t count, DType dtype, int n);

std::string mpi_error_text(int code);

}  // namespace shardwise::detail
