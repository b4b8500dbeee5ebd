#pragma once
// ShardingConfig: the parallelism degrees of a training run, as the reference module has them,
// plus a separate FSDP degree for hybrid sharding (HSDP: data_parallel_size replicas, each a
// group of fsdp_parallel_size ranks that shard parameters among themselves).

#include <cstdint>
#include <string>
#include <string_view>

namespace shardwise {

struct ShardingConfig {
  std::int64_t data_parallel_size = 1;
  std::int64_t tensor_parallel_size = 1;
  std::int64_t pipeline_parallel_size = 1;
  bool fsdp_enabled = false;
  // FSDP shards a weight only when its first dimension has at least this many rows.
  std::int64_t fsdp_min_weight_size = 1024;
  // 1: FSDP (when enabled) shards over the data axis itself (ZeRO-3 over every data rank).
  // > 1: a separate 'fsdp' axis of this size; the 'data' axis then holds replicas (HSDP).
  std::int64_t fsdp_parallel_size = 1;
  // Expert parallelism (not in the reference): an 'expert' axis of this size splits a Mixture of
  // Experts' experts and, with the data axes, the batch.
  std::int64_t expert_parallel_size = 1;

  // data x fsdp x expert x tensor x pipeline.
  [[nodiscard]] std::int64_t get_total_device_count() const;

  // The mesh axis FSDP shards over: "fsdp" with a separate degree, else "data".
  [[nodiscard]] std::string fsdp_axis_name() const;

  // Throws InvalidArgument naming the field: every size >= 1, fsdp_min_weight_size >= 0,
  // fsdp_parallel_size > 1 only with fsdp_enabled.
  void validate() const;

  // A configuration that uses exactly n devices. The reference module's answers where they use
  // all n (1 -> all ones; n <= 4 -> data n; 8 -> data 2 x tensor 4; else tensor =
  // min(8, floor(sqrt(n))), data = n / tensor), otherwise the tensor degree is lowered to the
  // largest divisor of n below it. Throws InvalidArgument for n < 1.
  static ShardingConfig from_device_count(std::int64_t n);

  // JSON object with the field names above; missing fields keep their defaults, unknown fields
  // and values of the wrong type are errors. The result is validated.
  static ShardingConfig from_json(std::string_view text);
  [[nodiscard]] std::string to_json() const;

  // "ShardingConfig(data=2, fsdp=1, tensor=4, pipeline=1, fsdp_enabled=false, ...)".
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const ShardingConfig&, const ShardingConfig&) = default;
};

}  // namespace shardwise
