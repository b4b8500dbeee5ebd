#pragma once
// What every model chunk checks of what it is given, in one wording: a micro-batch's tokens and
// targets, and the boundary activations passed between pipeline chunks.

#include <cstddef>
#include <cstdint>
#include <span>

#include "shardwise/train/pipeline_layout.hpp"

namespace shardwise::train {

// The sizes a chunk of `range` (of a model of `layers` layers) takes.
struct ChunkLimits {
  LayerRange range;
  std::size_t layers = 0;
  std::size_t context_length = 0;
  std::size_t vocab_size = 0;
  // The ranks a sequence is split over (sequence parallelism's model degree; 1 without).
  int sequence_split = 1;
};

// InvalidArgument unless batch and seq are at least 1, seq at most the context, the first chunk's
// tokens and the last chunk's targets batch x seq ids inside the vocabulary (a target may also be
// kernels::kIgnoredTarget, a position the loss does not count), and seq divides among the
// sequence split.
void check_chunk_batch(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                       std::size_t batch, std::size_t seq, const ChunkLimits& limits);

// InvalidArgument unless every chunk but the first receives `boundary` floats (input, or in
// backward the gradient it writes) and every chunk but the last passes them on (output, or the
// gradient it receives).
void check_chunk_forward_boundary(std::size_t input, std::size_t output, std::size_t boundary,
                                  const ChunkLimits& limits);
void check_chunk_backward_boundary(std::size_t output_grad, std::size_t input_grad,
                                   std::size_t boundary, const ChunkLimits& limits);

}  // namespace shardwise::train
