#include "shardwise/plan/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "detail/json_reader.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"

namespace shardwise::plan {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Bounds on a device and its links, wide enough for any hardware, narrow enough that every
// product and quotient the cost model forms stays a finite double (a bandwidth of 5e-324 gave
// a step of "inf s").
constexpr double kLeastFlops = 1e6;  // a microcontroller
constexpr double kMostFlops = 1e18;  // an exaflop per device
constexpr double kLeastBandwidth = 1e3;
constexpr double kMostBandwidth = 1e15;  // a petabyte per second
constexpr double kMostLatency = 10;      // seconds per step of a collective

std::string number_text(double value) {
  std::ostringstream out;
  out << std::setprecision(6) << value;
  return out.str();
}

void require_within(double value, double least, double most, const std::string& field,
                    const char* unit) {
  if (!(value >= least && value <= most)) {
    throw InvalidArgument("cluster " + field + " is " + number_text(value) + "; expected " +
                          number_text(least) + " to " + number_text(most) + " " + unit);
  }
}

double number_at(const nlohmann::json& json, const std::string& key, const std::string& where) {
  if (!json.contains(key)) throw InvalidArgument("cluster " + where + " needs \"" + key + "\"");
  const nlohmann::json& value = json.at(key);
  if (!value.is_number()) {
    throw InvalidArgument("cluster " + where + "\"" + key + "\" is " + value.dump().substr(0, 40) +
                          "; expected a number");
  }
  return value.get<double>();
}

Link link_from(const nlohmann::json& json, const std::string& key) {
  if (!json.contains(key) || !json.at(key).is_object()) {
    throw InvalidArgument("cluster needs \"" + key + "\": {\"bandwidth\": ..., \"latency\": ...}");
  }
  const nlohmann::json& link = json.at(key);
  for (const auto& [name, value] : link.items()) {
    if (name != "bandwidth" && name != "latency") {
      throw InvalidArgument("cluster \"" + key + "\" has an unknown key \"" + name + "\"");
    }
  }
  return {number_at(link, "bandwidth", key + " "), number_at(link, "latency", key + " ")};
}

}  // namespace

void Cluster::validate() const {
  if (devices < 1 || devices > Mesh::kMaxDevices) {
    throw InvalidArgument("cluster devices is " + std::to_string(devices) + "; expected 1 to " +
                          std::to_string(Mesh::kMaxDevices));
  }
  if (devices_per_node < 1) {
    throw InvalidArgument("cluster devices_per_node is " + std::to_string(devices_per_node));
  }
  if (devices > devices_per_node && devices % devices_per_node != 0) {
    throw InvalidArgument("cluster devices " + std::to_string(devices) +
                          " is not a whole number of nodes of " + std::to_string(devices_per_node));
  }
  if (memory_bytes < 1) {
    throw InvalidArgument("cluster memory_bytes is " + std::to_string(memory_bytes) +
                          "; expected a positive integer");
  }
  require_within(peak_flops_fp32, kLeastFlops, kMostFlops, "peak_flops_fp32", "FLOP/s");
  require_within(peak_flops_bf16, kLeastFlops, kMostFlops, "peak_flops_bf16", "FLOP/s");
  require_within(intra_node.bandwidth, kLeastBandwidth, kMostBandwidth, "intra_node bandwidth",
                 "bytes/s");
  require_within(inter_node.bandwidth, kLeastBandwidth, kMostBandwidth, "inter_node bandwidth",
                 "bytes/s");
  require_within(intra_node.latency, 0, kMostLatency, "intra_node latency", "seconds");
  require_within(inter_node.latency, 0, kMostLatency, "inter_node latency", "seconds");
  if (name.size() > kMaxNameLength ||
      std::any_of(name.begin(), name.end(), [](char c) { return c < 0x20 || c == 0x7f; })) {
    throw InvalidArgument("cluster name '" + echo_input(name, 40) + "' is not " +
                          std::to_string(kMaxNameLength) +
                          " or fewer printable characters (it is printed in reports)");
  }
}

std::vector<std::string> Cluster::preset_names() { return {"h100-80gb", "a100-80gb", "h200"}; }

Cluster Cluster::preset(std::string_view name, std::int64_t devices,
                        std::int64_t devices_per_node) {
  Cluster c;
  c.name = std::string(name);
  c.devices = devices;
  c.devices_per_node = devices_per_node;
  if (name == "h100-80gb" || name == "h200") {
    // H100 SXM: 989 TFLOP/s dense bf16, 67 TFLOP/s fp32; NVLink 4 at 450 GB/s each way;
    // one 400 Gb/s NDR port (50 GB/s) per device between nodes. H200: the same chip with
    // 141 GB of HBM3e.
    c.memory_bytes =
        name == "h200" ? static_cast<std::int64_t>(141e9) : static_cast<std::int64_t>(80 * kGiB);
    c.peak_flops_bf16 = 989.4e12;
    c.peak_flops_fp32 = 66.9e12;
    c.intra_node = {450e9, 10e-6};
    c.inter_node = {50e9, 20e-6};
  } else if (name == "a100-80gb") {
    // A100 SXM: 312 TFLOP/s dense bf16, 19.5 TFLOP/s fp32; NVLink 3 at 300 GB/s each way;
    // one 200 Gb/s HDR port (25 GB/s) per device.
    c.memory_bytes = static_cast<std::int64_t>(80 * kGiB);
    c.peak_flops_bf16 = 312e12;
    c.peak_flops_fp32 = 19.5e12;
    c.intra_node = {300e9, 10e-6};
    c.inter_node = {25e9, 20e-6};
  } else {
    throw InvalidArgument("--device '" + std::string(name).substr(0, 60) +
                          "' is not a preset (h100-80gb, a100-80gb, h200, cpu) or a readable "
                          "JSON file");
  }
  c.validate();
  return c;
}

Cluster Cluster::from_json(std::string_view text, std::int64_t devices) {
  const nlohmann::json json = detail::parse_json(text, "the cluster file");
  if (!json.is_object()) throw ParseError("the cluster file is not a JSON object");
  static const char* const kKeys[] = {
      "name",       "devices_per_node", "memory_bytes", "peak_flops_fp32", "peak_flops_bf16",
      "intra_node", "inter_node"};
  for (const auto& [key, value] : json.items()) {
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      throw InvalidArgument("the cluster file has an unknown key \"" + key.substr(0, 60) + "\"");
    }
  }
  Cluster c;
  c.name = "custom";
  if (json.contains("name")) c.name = detail::json_string(json["name"], "cluster name");
  const auto integer = [&](const char* key) {
    const double value = number_at(json, key, "");
    if (!(value >= 1 && value <= 9.0e15) || value != std::floor(value)) {
      throw InvalidArgument(std::string("cluster \"") + key + "\" is " +
                            json.at(key).dump().substr(0, 40) + "; expected a positive integer");
    }
    return static_cast<std::int64_t>(value);
  };
  c.devices = devices;
  c.devices_per_node = integer("devices_per_node");
  c.memory_bytes = integer("memory_bytes");
  c.peak_flops_fp32 = number_at(json, "peak_flops_fp32", "");
  c.peak_flops_bf16 = number_at(json, "peak_flops_bf16", "");
  c.intra_node = link_from(json, "intra_node");
  c.inter_node = link_from(json, "inter_node");
  c.validate();
  return c;
}

}  // namespace shardwise::plan
