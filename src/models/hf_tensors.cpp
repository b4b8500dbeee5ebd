#include "detail/hf_tensors.hpp"

#include <cstring>

#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/half.hpp"

namespace shardwise::models::detail {
namespace {

// Elements of `dtype` to floats.
void to_floats(const std::vector<std::byte>& bytes, DType dtype, float* out) {
  const std::size_t n = bytes.size() / size_in_bytes(dtype);
  switch (dtype) {
    case DType::kF32: std::memcpy(out, bytes.data(), bytes.size()); return;
    case DType::kF64:
      for (std::size_t i = 0; i < n; ++i) {
        double v = 0;
        std::memcpy(&v, bytes.data() + i * 8, 8);
        out[i] = static_cast<float>(v);
      }
      return;
    case DType::kF16:
      for (std::size_t i = 0; i < n; ++i) {
        Float16 v;
        std::memcpy(&v, bytes.data() + i * 2, 2);
        out[i] = to_float(v);
      }
      return;
    case DType::kBF16:
      for (std::size_t i = 0; i < n; ++i) {
        BFloat16 v;
        std::memcpy(&v, bytes.data() + i * 2, 2);
        out[i] = to_float(v);
      }
      return;
    default:
      throw InvalidArgument("a weight of dtype " + to_string(dtype) +
                            "; expected F32, F64, F16 or BF16");
  }
}

}  // namespace

std::vector<float> read_hf_floats(const ckpt::CheckpointReader& file, const std::string& hf_name,
                                  const ShardIndex& hf_box) {
  const ckpt::ArrayRecord* array = file.index().find(hf_name);
  std::uint64_t elements = 1;
  for (const IndexRange& range : hf_box) elements *= static_cast<std::uint64_t>(range.size());
  std::vector<std::byte> bytes(elements * size_in_bytes(array->dtype));
  const ckpt::BlockToLoad target{hf_name, array->shape, array->dtype, hf_box, bytes};
  (void)file.read({&target, 1});
  std::vector<float> values(elements);
  to_floats(bytes, array->dtype, values.data());
  return values;
}

void check_hf_tensor(const ckpt::CheckpointReader& file, const std::string& hf_name,
                     const Shape& expected, const std::string& layout) {
  const ckpt::ArrayRecord* array = file.index().find(hf_name);
  if (array == nullptr) throw ckpt::CheckpointError("the file has no tensor '" + hf_name + "'");
  if (array->shape != expected) {
    throw ckpt::CheckpointError("the file's '" + echo_input(hf_name, 200) + "' is " +
                                to_string(array->shape) + "; " + layout + " is " +
                                to_string(expected));
  }
  if (array->dtype != DType::kF32 && array->dtype != DType::kF64 && array->dtype != DType::kF16 &&
      array->dtype != DType::kBF16) {
    throw ckpt::CheckpointError("the file's '" + echo_input(hf_name, 200) + "' is " +
                                to_string(array->dtype) + "; expected F32, F64, F16 or BF16");
  }
}

}  // namespace shardwise::models::detail
