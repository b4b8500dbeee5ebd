#include "detail/post_processor.hpp"

namespace shardwise::text::detail {

std::vector<std::int32_t> apply_template(const Template& pieces,
                                         const std::vector<std::int32_t>& ids,
                                         bool add_special_tokens) {
  std::vector<std::int32_t> out;
  for (const TemplatePiece& piece : pieces) {
    if (piece.is_sequence) {
      out.insert(out.end(), ids.begin(), ids.end());
    } else if (add_special_tokens) {
      out.insert(out.end(), piece.special_ids.begin(), piece.special_ids.end());
    }
  }
  return out;
}

}  // namespace shardwise::text::detail
