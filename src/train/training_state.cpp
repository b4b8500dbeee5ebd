// The trainer's state as blocks of global arrays (include/shardwise/train/training_state.hpp).
#include "shardwise/train/training_state.hpp"

#include "sharded_units.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/train/trainer.hpp"
#include "unit_shards.hpp"

namespace shardwise::train {

std::string model_array(const std::string& name) { return "model/" + name; }
std::string exp_avg_array(const std::string& name) { return "optimizer/exp_avg/" + name; }
std::string exp_avg_sq_array(const std::string& name) { return "optimizer/exp_avg_sq/" + name; }

void StateBlock::wrong_type(DType wanted) const {
  throw InvalidArgument("state array '" + array + "' holds " + to_string(dtype) +
                        " elements, read as " + to_string(wanted));
}

std::vector<StateBlock> Trainer::state_blocks() {
  ParameterStore& store = store_;
  const std::vector<ParameterSpec>& specs = store.specs();
  const detail::UnitShards* shards = settings_.zero == 0 ? nullptr : &layout();
  float* values = units_ ? units_->values_slice().data() : store.values().data();
  std::vector<StateBlock> blocks;
  for (std::size_t p = 0; p < specs.size(); ++p) {
    const ParameterSpec& spec = specs[p];
    // The part of the whole parameter this rank's store holds (a tensor-parallel block).
    ShardIndex held;
    for (std::size_t d = 0; d < spec.shape.size(); ++d) {
      held.push_back(spec.block.empty() ? IndexRange{0, spec.shape[d]} : spec.block[d]);
    }
    const std::string model_words = spec.block.empty()
                                        ? std::string()
                                        : "block " + to_string(spec.block) + " of the model axis; ";
    // ZeRO's block of it, in the whole parameter's coordinates.
    ShardIndex owned = held;
    std::string zero_words = "whole on every data-parallel rank";
    if (shards != nullptr) {
      const ShardIndex local = shards->block_box(p, member_);
      for (std::size_t d = 0; d < owned.size(); ++d) {
        owned[d] = {held[d].start + local[d].start, held[d].start + local[d].stop};
      }
      zero_words = "ZeRO-" + std::to_string(settings_.zero) + " " +
                   settings_.shardings->specs[p].to_string() + " over " +
                   settings_.shardings->axis + "=" + std::to_string(settings_.shardings->size);
    }
    const bool values_sharded = units_ != nullptr;
    float* value = values_sharded ? values + shards->slice_offset(p) : values + store.offset(p);
    const std::size_t moment = shards != nullptr ? shards->slice_offset(p) : store.offset(p);
    const Shape& whole = spec.whole_shape();
    const auto bytes = [](float* data) { return reinterpret_cast<std::byte*>(data); };
    const DType dtype = element_type(value);
    blocks.push_back(
        {model_array(spec.name), whole, values_sharded ? owned : held,
         model_words + (values_sharded ? zero_words : "whole on every data-parallel rank"), dtype,
         bytes(value), !spec.tied_copy, false});
    blocks.push_back({exp_avg_array(spec.name), whole, owned, model_words + zero_words,
                      element_type(m_.data()), bytes(m_.data() + moment), !spec.tied_copy, true});
    blocks.push_back({exp_avg_sq_array(spec.name), whole, owned, model_words + zero_words,
                      element_type(v_.data()), bytes(v_.data() + moment), !spec.tied_copy, true});
  }
  // The model's own state (an expert bias): whole on every rank holding it, kept where a
  // checkpoint lacks it.
  for (const Model::StateArray& array : model_.state_arrays()) {
    ShardIndex whole;
    for (const std::int64_t size : array.shape) whole.push_back({0, size});
    StateBlock block{array.name,  array.shape,
                     whole,       "whole on every rank that holds it",
                     DType::kF32, reinterpret_cast<std::byte*>(array.values),
                     true,        false};
    block.model_state = true;
    blocks.push_back(std::move(block));
  }
  return blocks;
}

void Trainer::resume_at(std::int64_t steps) {
  if (steps < 0 || steps > settings_.steps) {
    throw InvalidArgument("a checkpoint of step " + std::to_string(steps) +
                          " cannot resume a run of " + std::to_string(settings_.steps) + " steps");
  }
  steps_done_ = steps;
}

}  // namespace shardwise::train
