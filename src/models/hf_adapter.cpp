#include "shardwise/models/hf_adapter.hpp"

namespace shardwise::models {

ShardIndex whole_box(const Shape& shape) {
  ShardIndex box;
  for (const std::int64_t size : shape) box.push_back({0, size});
  return box;
}

bool holds_whole(const std::vector<HfPiece>& pieces, const Shape& shape) {
  return pieces.size() == 1 && pieces.front().box == whole_box(shape);
}

std::vector<HfPiece> HfAdapter::hf_pieces(const ckpt::CheckpointIndex& file,
                                          const std::string& name, const Shape& shape) const {
  return {{hf_name_of(file, name), whole_box(shape), hf_shape(name, shape)}};
}

std::vector<HfPiece> HfAdapter::hf_export_pieces(const std::string& name,
                                                 const Shape& shape) const {
  return {{name, whole_box(shape), hf_shape(name, shape)}};
}

}  // namespace shardwise::models
