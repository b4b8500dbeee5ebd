#pragma once
// The post-processors' effect on ids: a TemplateProcessing's single-sequence template (one at
// most: the library hands a second the first's pieces as if they were sequences, taking its
// pair template or failing, so the reader refuses two). ByteLevel's post-processing changes
// offsets alone.

#include <cstdint>
#include <vector>

namespace shardwise::text::detail {

// One piece of a template: the sequence's ids ($A), or a special token's ids.
struct TemplatePiece {
  bool is_sequence = false;
  std::vector<std::int32_t> special_ids;
};
using Template = std::vector<TemplatePiece>;

// `ids` as the template places them; without add_special_tokens the special pieces add
// nothing, but the sequence still stands where the template puts it (twice for "$A $A").
[[nodiscard]] std::vector<std::int32_t> apply_template(const Template& pieces,
                                                       const std::vector<std::int32_t>& ids,
                                                       bool add_special_tokens);

}  // namespace shardwise::text::detail
