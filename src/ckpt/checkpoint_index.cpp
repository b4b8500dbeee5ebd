#include "shardwise/ckpt/checkpoint_index.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "detail/file_io.hpp"
#include "detail/json_reader.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/core/checked_math.hpp"
#include "shardwise/core/safetensors.hpp"

namespace shardwise::ckpt {
namespace {

std::string range_text(const IndexRange& range) {
  return std::to_string(range.start) + ":" + std::to_string(range.stop);
}

std::string box_text(const ShardIndex& box) {
  std::string text = "[";
  for (std::size_t d = 0; d < box.size(); ++d) text += (d > 0 ? "," : "") + range_text(box[d]);
  return text + "]";
}

// A file name the folder holds: no separator, not "." or "..".
bool plain_file_name(const std::string& name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  return name != kIndexFileName && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

std::uint64_t unsigned_field(const nlohmann::json& value, const std::string& field) {
  if (!value.is_number_unsigned()) {
    throw CheckpointError(field + " is " + echo_input(value.dump(), 40) +
                          "; expected a non-negative integer");
  }
  return value.get<std::uint64_t>();
}

std::int64_t size_field(const nlohmann::json& value, const std::string& field) {
  const std::uint64_t v = unsigned_field(value, field);
  if (v > static_cast<std::uint64_t>(INT64_MAX)) {
    throw CheckpointError(field + " is " + std::to_string(v) + "; at most 2^63 - 1");
  }
  return static_cast<std::int64_t>(v);
}

const nlohmann::json& member(const nlohmann::json& object, const char* key,
                             const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end()) throw CheckpointError(path + " lacks \"" + key + "\"");
  return *it;
}

void only_keys(const nlohmann::json& object, std::initializer_list<const char*> keys,
               const std::string& path) {
  for (const auto& item : object.items()) {
    const std::string& key = item.key();
    if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; })) {
      throw CheckpointError(path + " has an unknown field '" + echo_input(key, 60) + "'");
    }
  }
}

// The shards of an array tile it exactly when they form a grid: along each dimension the
// distinct ranges partition [0, size), every shard takes one range per dimension, and every
// combination is one shard. (Layouts the trainer has give grids: each dimension split into
// ranges, by the mesh and by ZeRO.) Checked in O(n log n), whatever the shards claim.
void check_grid(const ArrayRecord& array, const std::string& what) {
  const std::string path = what + ": array '" + echo_input(array.name, 200) + "'";
  if (array.shards.empty()) throw CheckpointError(path + " has no shards");
  const std::size_t rank = array.shape.size();
  std::uint64_t combinations = 1;
  for (std::size_t d = 0; d < rank; ++d) {
    std::vector<IndexRange> ranges;
    for (const ShardRecord& shard : array.shards) ranges.push_back(shard.box[d]);
    std::sort(ranges.begin(), ranges.end(), [](const IndexRange& a, const IndexRange& b) {
      return a.start != b.start ? a.start < b.start : a.stop < b.stop;
    });
    ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());
    std::int64_t reach = 0;
    for (const IndexRange& range : ranges) {
      if (range.start != reach || (range.stop <= range.start && array.shape[d] != 0)) {
        throw CheckpointError(path + ": its shards' ranges along dimension " + std::to_string(d) +
                              " do not split 0:" + std::to_string(array.shape[d]) +
                              " into consecutive parts (" + range_text(range) + " after " +
                              std::to_string(reach) + ")");
      }
      reach = range.stop;
    }
    if (reach != array.shape[d]) {
      throw CheckpointError(path + ": its shards cover dimension " + std::to_string(d) + " up to " +
                            std::to_string(reach) + " of " + std::to_string(array.shape[d]));
    }
    combinations = checked_multiply(combinations, static_cast<std::uint64_t>(ranges.size()),
                                    path + " shard count");
  }
  std::set<std::vector<std::int64_t>> seen;
  for (const ShardRecord& shard : array.shards) {
    std::vector<std::int64_t> key;
    for (const IndexRange& range : shard.box) {
      key.push_back(range.start);
      key.push_back(range.stop);
    }
    if (!seen.insert(std::move(key)).second) {
      throw CheckpointError(path + " has the shard " + box_text(shard.box) + " twice");
    }
  }
  if (combinations != array.shards.size()) {
    throw CheckpointError(path + " has " + std::to_string(array.shards.size()) +
                          " shards where its ranges make a grid of " +
                          std::to_string(combinations) + ": they do not tile it");
  }
}

}  // namespace

bool is_run_id(std::string_view text) {
  return text.size() == 32 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string new_run_id() { return shardwise::detail::random_hex(16); }

const ArrayRecord* CheckpointIndex::find(std::string_view name) const {
  const auto it =
      std::lower_bound(arrays.begin(), arrays.end(), name,
                       [](const ArrayRecord& a, std::string_view n) { return a.name < n; });
  return it != arrays.end() && it->name == name ? &*it : nullptr;
}

std::uint64_t CheckpointIndex::total_bytes() const {
  std::uint64_t total = 0;
  for (const ArrayRecord& array : arrays) {
    for (const ShardRecord& shard : array.shards) total += shard.length;
  }
  return total;
}

namespace {

void check_consistent_unchecked(const CheckpointIndex& index, const std::string& what) {
  if (index.arrays.size() > kMaxArrays) {
    throw CheckpointError(what + " lists " + std::to_string(index.arrays.size()) +
                          " arrays; at most " + std::to_string(kMaxArrays));
  }
  // Per file, every shard's byte range, to find two that share bytes.
  std::map<std::string, std::vector<std::tuple<std::uint64_t, std::uint64_t, std::string>>> extents;
  for (std::size_t a = 0; a < index.arrays.size(); ++a) {
    const ArrayRecord& array = index.arrays[a];
    const std::string path = what + ": array '" + echo_input(array.name, 200) + "'";
    if (array.name.empty()) throw CheckpointError(what + ": an array has an empty name");
    if (a > 0 && !(index.arrays[a - 1].name < array.name)) {
      throw CheckpointError(path + " is listed twice or out of order");
    }
    if (array.shape.size() > 16) throw CheckpointError(path + " has more than 16 dimensions");
    std::int64_t elements = 1;
    for (const std::int64_t size : array.shape) {
      if (size < 0) throw CheckpointError(path + " has a negative size");
      elements = checked_multiply(elements, size, path + " elements");
    }
    (void)checked_multiply(elements, static_cast<std::int64_t>(size_in_bytes(array.dtype)),
                           path + " bytes");
    if (array.shards.size() > kMaxShardsPerArray) {
      throw CheckpointError(path + " has " + std::to_string(array.shards.size()) +
                            " shards; at most " + std::to_string(kMaxShardsPerArray));
    }
    for (const ShardRecord& shard : array.shards) {
      const std::string at = path + " shard " + box_text(shard.box);
      if (shard.box.size() != array.shape.size()) {
        throw CheckpointError(at + " has " + std::to_string(shard.box.size()) +
                              " ranges for a shape of " + std::to_string(array.shape.size()) +
                              " dimensions");
      }
      std::uint64_t box_elements = 1;
      for (std::size_t d = 0; d < shard.box.size(); ++d) {
        const IndexRange& range = shard.box[d];
        if (range.start < 0 || range.stop < range.start || range.stop > array.shape[d]) {
          throw CheckpointError(at + " lies outside the array's shape " + to_string(array.shape));
        }
        box_elements *= static_cast<std::uint64_t>(range.size());  // <= elements: no overflow
      }
      const std::uint64_t bytes = box_elements * size_in_bytes(array.dtype);
      if (shard.length != bytes) {
        throw CheckpointError(at + " has length " + std::to_string(shard.length) +
                              "; its box holds " + std::to_string(bytes) + " bytes of " +
                              to_string(array.dtype));
      }
      if (!plain_file_name(shard.file)) {
        throw CheckpointError(at + " names the file '" + echo_input(shard.file, 60) +
                              "'; expected a plain file name of the checkpoint's folder");
      }
      if (shard.offset > UINT64_MAX - shard.length) {
        throw CheckpointError(at + " has offset " + std::to_string(shard.offset) +
                              " + length past 2^64");
      }
      if (shard.chunk_bytes > 0 &&
          (shard.chunk_bytes < kMinChunkBytes || shard.chunk_bytes > kMaxChunkBytes)) {
        throw CheckpointError(at + " has chunk_bytes " + std::to_string(shard.chunk_bytes) +
                              "; expected 0 (no checksums) or " + std::to_string(kMinChunkBytes) +
                              " to " + std::to_string(kMaxChunkBytes));
      }
      if (shard.chunk_bytes > 0) {
        const std::uint64_t chunks =
            shard.length == 0 ? 0 : (shard.length - 1) / shard.chunk_bytes + 1;
        if (shard.crc32c.size() != chunks) {
          throw CheckpointError(at + " has " + std::to_string(shard.crc32c.size()) +
                                " checksums for " + std::to_string(chunks) + " chunks of " +
                                std::to_string(shard.chunk_bytes) + " bytes");
        }
      } else if (!shard.crc32c.empty()) {
        throw CheckpointError(at + " has checksums but no chunk size");
      }
      if (shard.length > 0) {
        extents[shard.file].emplace_back(shard.offset, shard.offset + shard.length, at);
      }
    }
    check_grid(array, what);
  }
  for (auto& [file, ranges] : extents) {
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i) {
      if (std::get<0>(ranges[i]) < std::get<1>(ranges[i - 1])) {
        throw CheckpointError(std::get<2>(ranges[i - 1]) + " and " + std::get<2>(ranges[i]) +
                              " share bytes of the file '" + echo_input(file, 60) + "'");
      }
    }
  }
}

}  // namespace

void check_consistent(const CheckpointIndex& index, const std::string& what) {
  try {
    check_consistent_unchecked(index, what);
  } catch (const CheckpointError&) {
    throw;
  } catch (const Error& e) {  // checked arithmetic's overflow, an InvalidArgument
    throw CheckpointError(what + ": " + e.what());
  }
}

CheckpointIndex parse_checkpoint_index(std::string_view text, const std::string& what) {
  if (text.size() > kMaxIndexBytes) {
    throw CheckpointError(what + " has " + std::to_string(text.size()) + " bytes; at most " +
                          std::to_string(kMaxIndexBytes));
  }
  nlohmann::json json;
  try {
    json = detail::parse_json(text, what);
  } catch (const ParseError& e) {
    throw CheckpointError(e.what());
  }
  if (!json.is_object()) throw CheckpointError(what + " is not a JSON object");
  only_keys(json, {"format", "version", "run", "lineage", "metadata", "arrays"}, what);
  const nlohmann::json& format = member(json, "format", what);
  if (format != "shardwise-checkpoint") {
    throw CheckpointError(what + ": \"format\" is " + echo_input(format.dump(), 40) +
                          "; expected \"shardwise-checkpoint\"");
  }
  const std::uint64_t version = unsigned_field(member(json, "version", what), what + " version");
  if (version != kIndexFormatVersion) {
    throw CheckpointError(what + " has version " + std::to_string(version) +
                          "; this shardwise reads version " + std::to_string(kIndexFormatVersion));
  }
  CheckpointIndex index;
  if (const auto run = json.find("run"); run != json.end()) {
    if (!run->is_string() || !is_run_id(run->get<std::string>())) {
      throw CheckpointError(what + ": \"run\" is " + echo_input(run->dump(), 60) +
                            "; expected 32 lowercase hex digits");
    }
    index.run_id = run->get<std::string>();
  }
  if (const auto lineage = json.find("lineage"); lineage != json.end()) {
    if (!lineage->is_array() || lineage->size() > kMaxAncestors) {
      throw CheckpointError(what + ": \"lineage\" is not a list of at most " +
                            std::to_string(kMaxAncestors) + " [run, step] pairs");
    }
    for (const nlohmann::json& entry : *lineage) {
      if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() ||
          !is_run_id(entry[0].get<std::string>())) {
        throw CheckpointError(what + ": \"lineage\" holds " + echo_input(entry.dump(), 60) +
                              "; expected [run, step] with a run of 32 lowercase hex digits");
      }
      index.ancestors.push_back(
          {entry[0].get<std::string>(), size_field(entry[1], what + " lineage step")});
    }
  }
  const nlohmann::json& metadata = member(json, "metadata", what);
  if (!metadata.is_object()) throw CheckpointError(what + ": \"metadata\" is not an object");
  index.metadata_json = metadata.dump();
  const nlohmann::json& arrays = member(json, "arrays", what);
  if (!arrays.is_object()) throw CheckpointError(what + ": \"arrays\" is not an object");
  if (arrays.size() > kMaxArrays) {
    throw CheckpointError(what + " lists " + std::to_string(arrays.size()) + " arrays; at most " +
                          std::to_string(kMaxArrays));
  }
  for (const auto& [name, entry] : arrays.items()) {  // nlohmann's objects iterate in key order
    const std::string path = what + ": array '" + echo_input(name, 200) + "'";
    if (!entry.is_object()) throw CheckpointError(path + " is not an object");
    only_keys(entry, {"shape", "dtype", "sharding", "shards"}, path);
    ArrayRecord array;
    array.name = name;
    const nlohmann::json& shape = member(entry, "shape", path);
    if (!shape.is_array() || shape.size() > 16) {
      throw CheckpointError(path + ": \"shape\" is not a list of at most 16 sizes");
    }
    for (const nlohmann::json& size : shape)
      array.shape.push_back(size_field(size, path + " shape"));
    const nlohmann::json& dtype = member(entry, "dtype", path);
    if (!dtype.is_string()) throw CheckpointError(path + ": \"dtype\" is not a string");
    try {
      array.dtype = safetensors_dtype(dtype.get<std::string>(), path);
    } catch (const ParseError& e) {
      throw CheckpointError(e.what());
    }
    const nlohmann::json& sharding = member(entry, "sharding", path);
    if (!sharding.is_string()) throw CheckpointError(path + ": \"sharding\" is not a string");
    array.sharding = sharding.get<std::string>();
    const nlohmann::json& shards = member(entry, "shards", path);
    if (!shards.is_array() || shards.size() > kMaxShardsPerArray) {
      throw CheckpointError(path + ": \"shards\" is not a list of at most " +
                            std::to_string(kMaxShardsPerArray));
    }
    for (std::size_t s = 0; s < shards.size(); ++s) {
      const nlohmann::json& item = shards[s];
      const std::string at = path + " shard " + std::to_string(s);
      if (!item.is_object()) throw CheckpointError(at + " is not an object");
      only_keys(item, {"box", "file", "offset", "length", "chunk_bytes", "crc32c"}, at);
      ShardRecord shard;
      const nlohmann::json& box = member(item, "box", at);
      if (!box.is_array() || box.size() != array.shape.size()) {
        throw CheckpointError(at + ": \"box\" is not a list of " +
                              std::to_string(array.shape.size()) + " [start, stop] ranges");
      }
      for (const nlohmann::json& range : box) {
        if (!range.is_array() || range.size() != 2) {
          throw CheckpointError(at + ": a range of \"box\" is not [start, stop]");
        }
        shard.box.push_back(
            {size_field(range[0], at + " box start"), size_field(range[1], at + " box stop")});
      }
      const nlohmann::json& file = member(item, "file", at);
      if (!file.is_string()) throw CheckpointError(at + ": \"file\" is not a string");
      shard.file = file.get<std::string>();
      shard.offset = unsigned_field(member(item, "offset", at), at + " offset");
      shard.length = unsigned_field(member(item, "length", at), at + " length");
      shard.chunk_bytes = unsigned_field(member(item, "chunk_bytes", at), at + " chunk_bytes");
      // A shard without checksums could hold anything (NaN where the model was) and verify.
      if (shard.chunk_bytes == 0) {
        throw CheckpointError(at +
                              " has chunk_bytes 0 (no checksums); every shard of a "
                              "checkpoint has them");
      }
      const nlohmann::json& crcs = member(item, "crc32c", at);
      if (!crcs.is_array()) throw CheckpointError(at + ": \"crc32c\" is not a list");
      // Bounded before anything is allocated for it: one checksum per chunk of the shard.
      const std::uint64_t most = shard.chunk_bytes == 0 ? 0 : shard.length / shard.chunk_bytes + 1;
      if (crcs.size() > most) {
        throw CheckpointError(at + " has " + std::to_string(crcs.size()) +
                              " checksums; its length and chunk size allow at most " +
                              std::to_string(most));
      }
      for (const nlohmann::json& crc : crcs) {
        const std::uint64_t value = unsigned_field(crc, at + " crc32c");
        if (value > UINT32_MAX) throw CheckpointError(at + " has a crc32c above 2^32 - 1");
        shard.crc32c.push_back(static_cast<std::uint32_t>(value));
      }
      array.shards.push_back(std::move(shard));
    }
    index.arrays.push_back(std::move(array));
  }
  check_consistent(index, what);
  return index;
}

std::string checkpoint_index_json(const CheckpointIndex& index) {
  nlohmann::json arrays = nlohmann::json::object();
  for (const ArrayRecord& array : index.arrays) {
    nlohmann::json shards = nlohmann::json::array();
    for (const ShardRecord& shard : array.shards) {
      nlohmann::json box = nlohmann::json::array();
      for (const IndexRange& range : shard.box) box.push_back({range.start, range.stop});
      shards.push_back({{"box", box},
                        {"file", shard.file},
                        {"offset", shard.offset},
                        {"length", shard.length},
                        {"chunk_bytes", shard.chunk_bytes},
                        {"crc32c", shard.crc32c}});
    }
    arrays[array.name] = {{"shape", array.shape},
                          {"dtype", safetensors_dtype_name(array.dtype)},
                          {"sharding", array.sharding},
                          {"shards", shards}};
  }
  nlohmann::json json{{"format", "shardwise-checkpoint"},
                      {"version", kIndexFormatVersion},
                      {"metadata", nlohmann::json::parse(index.metadata_json)},
                      {"arrays", arrays}};
  if (!index.run_id.empty()) json["run"] = index.run_id;
  if (!index.ancestors.empty()) {
    nlohmann::json lineage = nlohmann::json::array();
    for (const RunAncestor& ancestor : index.ancestors) {
      lineage.push_back({ancestor.run_id, ancestor.step});
    }
    json["lineage"] = lineage;
  }
  // Names hold what callers gave; bytes that are not UTF-8 would make dump() throw.
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace shardwise::ckpt
