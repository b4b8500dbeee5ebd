#pragma once
// The devices a plan runs on: how many, how they are grouped in nodes, their memory and peak
// FLOP/s, and the links between them (bandwidth as nccl-tests' bus bandwidth, latency per
// step of a ring).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardwise::plan {

struct Link {
  double bandwidth = 0;  // bytes/s per device, nccl-tests' bus bandwidth
  double latency = 0;    // seconds per step of a collective
  friend bool operator==(const Link&, const Link&) = default;
};

struct Cluster {
  static constexpr std::size_t kMaxNameLength = 100;

  std::string name;
  std::int64_t devices = 1;
  std::int64_t devices_per_node = 1;
  std::int64_t memory_bytes = 0;  // per device
  double peak_flops_fp32 = 0;     // per device
  double peak_flops_bf16 = 0;
  Link intra_node;
  Link inter_node;

  // Throws InvalidArgument naming the field: counts below 1, devices_per_node not dividing
  // devices (when there are several nodes), memory below 1 byte, peak FLOP/s outside 1e6 to
  // 1e18, bandwidth outside 1e3 to 1e15 bytes/s, latency outside 0 to 10 s (so that every
  // prediction is a finite number), a name of control characters or over kMaxNameLength.
  void validate() const;

  // h100-80gb, a100-80gb, h200 (SXM, NVLink in a node, 400 or 200 Gb/s InfiniBand per device
  // between nodes; docs/planner.md gives the sources). InvalidArgument naming the preset
  // otherwise.
  static Cluster preset(std::string_view name, std::int64_t devices, std::int64_t devices_per_node);
  static std::vector<std::string> preset_names();

  // {"name": ..., "devices_per_node": 8, "memory_bytes": ..., "peak_flops_fp32": ...,
  //  "peak_flops_bf16": ..., "intra_node": {"bandwidth": ..., "latency": ...},
  //  "inter_node": {...}} for `devices` devices. Unknown keys and bad values are errors naming
  // the key.
  static Cluster from_json(std::string_view text, std::int64_t devices);
};

}  // namespace shardwise::plan
