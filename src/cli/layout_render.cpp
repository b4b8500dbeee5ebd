#include "layout_render.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "text_table.hpp"

namespace shardwise::cli {
namespace {

std::string coords_text(const Mesh& mesh, DeviceId device) {
  const std::vector<std::int64_t> coords = mesh.coords_of(device);
  std::string text;
  for (std::size_t a = 0; a < coords.size(); ++a) {
    text += (a ? " " : "") + mesh.axis_names()[a] + "=" + std::to_string(coords[a]);
  }
  return text;
}

// The distinct non-empty ranges the shards cut dimension d into, in order.
std::vector<IndexRange> block_ranges(const std::vector<DeviceShard>& shards, std::size_t d) {
  std::vector<IndexRange> ranges;
  for (const DeviceShard& shard : shards) {
    if (!shard.index[d].empty()) ranges.push_back(shard.index[d]);
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const IndexRange& a, const IndexRange& b) { return a.start < b.start; });
  ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());
  return ranges;
}

// Sizes proportional to `extents` summing to about `total`, each at least its minimum.
std::vector<std::size_t> scale(const std::vector<std::int64_t>& extents, std::size_t total,
                               const std::vector<std::size_t>& minimum) {
  std::int64_t sum = 0;
  for (std::int64_t e : extents) sum += e;
  std::vector<std::size_t> sizes(extents.size());
  for (std::size_t i = 0; i < extents.size(); ++i) {
    const auto share = static_cast<std::size_t>(std::lround(
        static_cast<double>(extents[i]) * static_cast<double>(total) / static_cast<double>(sum)));
    sizes[i] = std::max(minimum[i], share);
  }
  return sizes;
}

std::string repeat(const std::string& piece, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) out += piece;
  return out;
}

std::string border(const std::vector<std::size_t>& widths, const char* left, const char* middle,
                   const char* right) {
  std::string line = left;
  for (std::size_t c = 0; c < widths.size(); ++c) {
    line += repeat("─", widths[c]) + (c + 1 < widths.size() ? middle : right);
  }
  return line + "\n";
}

std::string centered(const std::string& text, std::size_t width) {
  const std::size_t left = (width - text.size()) / 2;
  return std::string(left, ' ') + text + std::string(width - text.size() - left, ' ');
}

constexpr std::size_t kDrawingWidth = 64;
constexpr std::size_t kMaxDrawingWidth = 160;
// Blocks are at least "dev N" plus a border wide, and a drawing taller than this many block
// rows does not fit a screen.
constexpr std::size_t kMinBlockWidth = 8;
constexpr std::size_t kMaxDrawnBlockRows = 64;
// Past this many devices the text report lists the first ones and says how many it left out.
constexpr std::size_t kMaxListedDevices = 4096;

// The position of `range` among sorted, distinct ranges.
std::size_t position_of(const std::vector<IndexRange>& ranges, const IndexRange& range) {
  return static_cast<std::size_t>(
      std::lower_bound(ranges.begin(), ranges.end(), range,
                       [](const IndexRange& a, const IndexRange& b) { return a.start < b.start; }) -
      ranges.begin());
}

}  // namespace

std::string draw_sharding(const NamedSharding& sharding, const Shape& global_shape) {
  const std::size_t rank = global_shape.size();
  if (rank != 1 && rank != 2) return "";
  const std::vector<DeviceShard> shards = sharding.devices_indices_map(global_shape);
  const std::vector<IndexRange> rows =
      rank == 2 ? block_ranges(shards, 0) : std::vector<IndexRange>{{0, 1}};
  const std::vector<IndexRange> cols = block_ranges(shards, rank - 1);
  if (rows.empty() || cols.empty()) return "(the array has no elements: nothing to draw)\n";
  if (cols.size() * kMinBlockWidth > kMaxDrawingWidth || rows.size() > kMaxDrawnBlockRows) {
    return "(" + std::to_string(rows.size()) + " x " + std::to_string(cols.size()) +
           " blocks are too many to draw in a terminal)\n";
  }

  // labels[r][c]: the devices holding block (r, c), in mesh order (one pass over the shards).
  std::vector<std::vector<std::vector<std::int64_t>>> holders(
      rows.size(), std::vector<std::vector<std::int64_t>>(cols.size()));
  for (const DeviceShard& shard : shards) {
    if (is_empty(shard.index)) continue;
    const std::size_t r = rank == 1 ? 0 : position_of(rows, shard.index[0]);
    holders[r][position_of(cols, shard.index[rank - 1])].push_back(shard.device);
  }
  std::vector<std::vector<std::string>> labels(rows.size(), std::vector<std::string>(cols.size()));
  std::vector<std::size_t> min_widths(cols.size(), 0);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t c = 0; c < cols.size(); ++c) {
      const std::vector<std::int64_t>& devices = holders[r][c];
      // A label longer than the drawing's width cannot be drawn anyway: stop joining there.
      std::string label = "dev ";
      for (std::size_t i = 0; i < devices.size() && label.size() <= kMaxDrawingWidth; ++i) {
        if (i > 0) label += ',';
        label += std::to_string(devices[i]);
      }
      labels[r][c] = std::move(label);
      min_widths[c] = std::max(min_widths[c], labels[r][c].size() + 2);
    }
  }
  std::size_t min_total = 0;
  for (std::size_t w : min_widths) min_total += w + 1;
  if (min_total > kMaxDrawingWidth) {
    return "(" + std::to_string(rows.size() * cols.size()) +
           " blocks are too many to draw in a terminal)\n";
  }

  std::vector<std::int64_t> col_extents;
  for (const IndexRange& c : cols) col_extents.push_back(c.size());
  const std::vector<std::size_t> widths = scale(col_extents, kDrawingWidth, min_widths);

  std::vector<std::size_t> heights(rows.size(), 1);
  if (rank == 2) {
    // Terminal cells are about twice as tall as wide: halve the height to keep proportions.
    std::vector<std::int64_t> row_extents;
    for (const IndexRange& r : rows) row_extents.push_back(r.size());
    const double aspect =
        static_cast<double>(global_shape[0]) / static_cast<double>(global_shape[1]);
    const auto wanted = static_cast<std::size_t>(std::lround(kDrawingWidth * aspect / 2.0));
    const std::size_t total = std::clamp(wanted, rows.size(), rows.size() * 3);
    heights = scale(row_extents, total, std::vector<std::size_t>(rows.size(), 1));
  }

  std::string out = border(widths, "┌", "┬", "┐");
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t line = 0; line < heights[r]; ++line) {
      out += "│";
      for (std::size_t c = 0; c < cols.size(); ++c) {
        const bool label_line = line == (heights[r] - 1) / 2;
        out += (label_line ? centered(labels[r][c], widths[c]) : std::string(widths[c], ' ')) + "│";
      }
      out += "\n";
    }
    out += r + 1 < rows.size() ? border(widths, "├", "┼", "┤") : border(widths, "└", "┴", "┘");
  }
  return out;
}

std::string render_layout_text(const NamedSharding& sharding, const Shape& global_shape) {
  const std::vector<DeviceShard> shards = sharding.devices_indices_map(global_shape);
  const std::vector<std::int64_t> per_dim = sharding.num_shards(global_shape.size());
  std::int64_t distinct = 1;
  for (std::int64_t n : per_dim) distinct *= n;

  std::ostringstream out;
  out << "mesh          " << sharding.mesh().to_string() << '\n'
      << "spec          " << sharding.spec().to_string()
      << (sharding.evenness() == Evenness::kUneven ? "  (uneven allowed)" : "") << '\n'
      << "global shape  " << to_string(global_shape) << '\n'
      << "shard shape   " << to_string(sharding.shard_shape(global_shape))
      << (sharding.evenness() == Evenness::kUneven ? "  (largest shard)" : "") << '\n'
      << "shards        " << (per_dim.empty() ? "1" : join_ints(per_dim, " x ")) << " = "
      << distinct << " distinct, each on " << sharding.num_replicas() << " device"
      << (sharding.num_replicas() == 1 ? "" : "s") << "\n\n";

  std::vector<std::vector<std::string>> table{{"device", "coords", "index", "replica"}};
  for (std::size_t i = 0; i < shards.size() && i < kMaxListedDevices; ++i) {
    const DeviceShard& shard = shards[i];
    table.push_back({std::to_string(shard.device), coords_text(sharding.mesh(), shard.device),
                     to_string(shard.index), std::to_string(shard.replica_id)});
  }
  out << format_table(table);
  if (shards.size() > kMaxListedDevices) {
    out << "... and " << shards.size() - kMaxListedDevices
        << " more devices (--json lists every one)\n";
  }
  const std::string drawing = draw_sharding(sharding, global_shape);
  if (!drawing.empty()) {
    out << '\n' << drawing;
  } else if (!global_shape.empty()) {
    out << "\n(drawings are made for 1-D and 2-D arrays)\n";
  }
  return out.str();
}

std::string render_layout_json(const NamedSharding& sharding, const Shape& global_shape) {
  using nlohmann::ordered_json;
  const Mesh& mesh = sharding.mesh();
  ordered_json shard_list = ordered_json::array();
  for (const DeviceShard& shard : sharding.devices_indices_map(global_shape)) {
    ordered_json index = ordered_json::array();
    for (const IndexRange& range : shard.index) index.push_back({range.start, range.stop});
    shard_list.push_back(
        {{"device", shard.device}, {"index", std::move(index)}, {"replica_id", shard.replica_id}});
  }
  ordered_json result = {
      {"mesh", {{"axis_names", mesh.axis_names()}, {"axis_sizes", mesh.axis_sizes()}}},
      {"spec", sharding.spec().to_string()},
      {"global_shape", global_shape},
      {"shard_shape", sharding.shard_shape(global_shape)},
      {"shards", std::move(shard_list)},
  };
  return result.dump();
}

}  // namespace shardwise::cli
