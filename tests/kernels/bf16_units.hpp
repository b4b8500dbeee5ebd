#pragma once
// The bf16 units (kernels::use_bf16_units) on or off for a scope, their default again after it:
// tests that compare the units' path with the widened float32 path.

#include "shardwise/kernels/bf16_matmul.hpp"

namespace shardwise::kernels {

class UnitsOn {
 public:
  explicit UnitsOn(bool on) { use_bf16_units(on); }
  ~UnitsOn() { use_bf16_units(std::nullopt); }
  UnitsOn(const UnitsOn&) = delete;
  UnitsOn& operator=(const UnitsOn&) = delete;
};

}  // namespace shardwise::kernels
