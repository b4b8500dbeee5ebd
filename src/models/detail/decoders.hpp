#pragma once
// The families' decoders (train/decoder.hpp), made by their definitions' build_decoder.

#include <cstddef>
#include <memory>

#include "shardwise/models/gpt.hpp"
#include "shardwise/models/llama.hpp"
#include "shardwise/train/decoder.hpp"
#include "shardwise/train/parameter_store.hpp"
#include "shardwise/train/tensor_parallel.hpp"

namespace shardwise::models::detail {

[[nodiscard]] std::unique_ptr<train::Decoder> make_gpt_decoder(
    const GptConfig& config, train::ParameterStore& store,
    const train::TensorParallel& tensor_parallel, std::size_t capacity);
[[nodiscard]] std::unique_ptr<train::Decoder> make_llama_decoder(
    const LlamaConfig& config, train::ParameterStore& store,
    const train::TensorParallel& tensor_parallel, std::size_t capacity);

}  // namespace shardwise::models::detail
