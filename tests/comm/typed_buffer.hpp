#pragma once
// Buffers of any dtype filled from and read back as doubles, for closed-form checks.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/half.hpp"

namespace shardwise::testing {

class TypedBuffer {
 public:
  TypedBuffer(DType dtype, std::size_t count)
      : dtype_(dtype), count_(count), bytes_(count * size_in_bytes(dtype)) {}

  void set(std::size_t i, double value) {
    std::byte* p = bytes_.data() + i * size_in_bytes(dtype_);
    switch (dtype_) {
      case DType::kF32: store(p, static_cast<float>(value)); break;
      case DType::kF64: store(p, value); break;
      case DType::kI32: store(p, static_cast<std::int32_t>(value)); break;
      case DType::kI64: store(p, static_cast<std::int64_t>(value)); break;
      case DType::kBF16: store(p, to_bfloat16(static_cast<float>(value))); break;
      case DType::kF16: store(p, to_float16(static_cast<float>(value))); break;
      case DType::kU8: store(p, static_cast<std::uint8_t>(value)); break;
      case DType::kI8: store(p, static_cast<std::int8_t>(value)); break;
      case DType::kBool: store(p, static_cast<std::uint8_t>(value != 0 ? 1 : 0)); break;
    }
  }

  [[nodiscard]] double get(std::size_t i) const {
    const std::byte* p = bytes_.data() + i * size_in_bytes(dtype_);
    switch (dtype_) {
      case DType::kF32: return load<float>(p);
      case DType::kF64: return load<double>(p);
      case DType::kI32: return load<std::int32_t>(p);
      case DType::kI64: return static_cast<double>(load<std::int64_t>(p));
      case DType::kBF16: return to_float(load<BFloat16>(p));
      case DType::kF16: return to_float(load<Float16>(p));
      case DType::kU8: return load<std::uint8_t>(p);
      case DType::kI8: return load<std::int8_t>(p);
      case DType::kBool: return load<std::uint8_t>(p) != 0 ? 1 : 0;
    }
    return 0;
  }

  void* data() { return bytes_.data(); }
  [[nodiscard]] const void* data() const { return bytes_.data(); }
  [[nodiscard]] std::size_t count() const { return count_; }
  [[nodiscard]] DType dtype() const { return dtype_; }

 private:
  template <typename T>
  static void store(std::byte* p, T value) {
    std::memcpy(p, &value, sizeof value);
  }
  template <typename T>
  static T load(const std::byte* p) {
    T value{};
    std::memcpy(&value, p, sizeof value);
    return value;
  }

  DType dtype_;
  std::size_t count_;
  std::vector<std::byte> bytes_;
};

}  // namespace shardwise::testing
