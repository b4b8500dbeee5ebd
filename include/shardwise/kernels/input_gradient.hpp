#pragma once

namespace shardwise::kernels {

// Whether a backward kernel adds the input's gradient to what its buffer holds, or writes it (a
// scratch with nothing to add to: no pass to zero it first).
enum class InputGradient { kAccumulate, kOverwrite };

}  // namespace shardwise::kernels
