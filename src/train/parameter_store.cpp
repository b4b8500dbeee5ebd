#include "shardwise/train/parameter_store.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "detail/splitmix.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"

namespace shardwise::train {
namespace {

// A uniform draw in (0, 1) from 53 random bits.
double unit(std::uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) / 9007199254740992.0;
}

void check_block(const ParameterSpec& spec) {
  if (spec.block.empty()) return;
  const auto named = [&](const std::string& what) {
    return InvalidArgument("parameter '" + spec.name + "': " + what);
  };
  if (spec.block.size() != spec.global_shape.size() || spec.shape.size() != spec.block.size()) {
    throw named("its block has " + std::to_string(spec.block.size()) + " ranges for a shape " +
                to_string(spec.shape) + " of a whole " + to_string(spec.global_shape));
  }
  for (std::size_t d = 0; d < spec.block.size(); ++d) {
    const IndexRange& range = spec.block[d];
    if (range.start < 0 || range.stop > spec.global_shape[d] || range.size() != spec.shape[d] ||
        range.stop < range.start) {
      throw named("its block [" + std::to_string(range.start) + ", " + std::to_string(range.stop) +
                  ") along dimension " + std::to_string(d) + " does not fit the whole " +
                  to_string(spec.global_shape) + " or its shape " + to_string(spec.shape));
    }
  }
}

// The index in the whole parameter of element `local` (row-major) of the rank's block.
std::uint64_t whole_index(const ParameterSpec& spec, std::size_t local) {
  if (spec.block.empty()) return static_cast<std::uint64_t>(local);
  std::uint64_t whole = 0;
  std::uint64_t stride = 1;
  for (std::size_t d = spec.shape.size(); d-- > 0;) {
    const auto size = static_cast<std::uint64_t>(spec.shape[d]);
    const std::uint64_t at = size == 0 ? 0 : local % size;
    local = size == 0 ? 0 : local / size;
    whole += (static_cast<std::uint64_t>(spec.block[d].start) + at) * stride;
    stride *= static_cast<std::uint64_t>(spec.global_shape[d]);
  }
  return whole;
}

}  // namespace

float standard_normal_at(std::uint64_t seed, const std::string& name, std::uint64_t index) {
  const std::uint64_t base = detail::splitmix64(seed ^ detail::splitmix64(detail::fnv1a(name)));
  const std::uint64_t a = detail::splitmix64(base ^ (2 * index));
  const std::uint64_t b = detail::splitmix64(base ^ (2 * index + 1));
  // Box-Muller, one of its two outputs.
  constexpr double kTwoPi = 6.283185307179586;
  return static_cast<float>(std::sqrt(-2.0 * std::log(unit(a))) * std::cos(kTwoPi * unit(b)));
}

ParameterStore::ParameterStore(std::vector<ParameterSpec> specs, Gradients gradients)
    : specs_(std::move(specs)), gradients_(gradients) {
  std::set<std::string> names;
  std::size_t total = 0;
  for (const ParameterSpec& spec : specs_) {
    if (!names.insert(spec.name).second) {
      throw InvalidArgument("parameter '" + spec.name + "' is declared twice");
    }
    if (!spec.logical_axes.empty() && spec.logical_axes.size() != spec.shape.size()) {
      throw InvalidArgument("parameter '" + spec.name + "' has " +
                            std::to_string(spec.logical_axes.size()) + " logical axes for " +
                            std::to_string(spec.shape.size()) + " dimensions");
    }
    check_block(spec);
    const auto elements = static_cast<std::size_t>(num_elements(spec.shape));  // checked
    offsets_.push_back(total);
    counts_.push_back(elements);
    if (elements > (std::size_t{1} << 40) - total) {
      throw InvalidArgument("parameter '" + spec.name + "' takes the model past 2^40 elements");
    }
    total += elements;
  }
  parameter_elements_ = total;
  // Units: runs of consecutive parameters with the same unit name.
  std::set<std::string> closed;
  for (std::size_t p = 0; p < specs_.size(); ++p) {
    const std::string& name = specs_[p].unit;
    if (units_.empty() || units_.back().name != name) {
      if (!units_.empty()) closed.insert(units_.back().name);
      if (closed.count(name) != 0) {
        throw InvalidArgument("parameter '" + specs_[p].name + "' is in unit '" + name +
                              "', whose parameters are not consecutive");
      }
      units_.push_back({name, p, p, offsets_[p], 0});
    }
    units_.back().end = p + 1;
    units_.back().count += counts_[p];
    unit_of_.push_back(units_.size() - 1);
  }
}

void ParameterStore::materialize() const {
  if (sharded_ || !values_.empty() || parameter_elements_ == 0) return;
  values_.assign(parameter_elements_, 0.0F);
  if (gradients_ == Gradients::kKept) grads_.assign(parameter_elements_, 0.0F);
  ever_allocated_ = true;
  if (!pending_seed_) return;
  for (std::size_t p = 0; p < specs_.size(); ++p) {
    initial_values(p, 0, counts_[p], values_.data() + offsets_[p]);
  }
}

void ParameterStore::initialize_on_use(std::uint64_t seed) {
  if (sharded_) throw InvalidArgument("initialize: the store is sharded");
  values_ = {};
  grads_ = {};
  pending_seed_ = seed;
  mark_values_changed();
}

void ParameterStore::initial_values(std::size_t p, std::size_t from, std::size_t count,
                                    float* out) const {
  if (!pending_seed_) throw InvalidArgument("initial_values: no initialisation is pending");
  const ParameterSpec& spec = specs_[p];
  if (from > counts_[p] || count > counts_[p] - from) {
    throw InvalidArgument("initial_values: elements [" + std::to_string(from) + ", " +
                          std::to_string(from + count) + ") of parameter '" + spec.name + "' of " +
                          std::to_string(counts_[p]));
  }
  switch (spec.init.kind) {
    case ParameterInit::Kind::kZeros: std::fill(out, out + count, 0.0F); return;
    case ParameterInit::Kind::kOnes: std::fill(out, out + count, 1.0F); return;
    case ParameterInit::Kind::kNormal: break;
  }
  for (std::size_t i = 0; i < count; ++i) {
    out[i] =
        spec.init.std * standard_normal_at(*pending_seed_, spec.name, whole_index(spec, from + i));
  }
}

std::size_t ParameterStore::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].name == name) return i;
  }
  throw InvalidArgument("no parameter is called '" + name + "'");
}

float* ParameterStore::sharded_value(std::size_t index) {
  const ParameterUnit& unit = units_[unit_of_[index]];
  float* base = residency_ == nullptr ? nullptr : residency_->values(unit_of_[index]);
  if (base == nullptr) {
    throw InvalidArgument("parameter '" + specs_[index].name + "' was read while its unit '" +
                          unit.name +
                          "' is not gathered (a model gathers a unit before it uses it, "
                          "and releases it after)");
  }
  return base + (offsets_[index] - unit.offset);
}

float* ParameterStore::sharded_grad(std::size_t index) {
  const ParameterUnit& unit = units_[unit_of_[index]];
  float* base = residency_ == nullptr ? nullptr : residency_->grads(unit_of_[index]);
  if (base == nullptr) {
    throw InvalidArgument("the gradients of parameter '" + specs_[index].name + "' (unit '" +
                          unit.name + "') were used outside backward, or after they were reduced");
  }
  return base + (offsets_[index] - unit.offset);
}

void ParameterStore::gather(std::size_t unit) {
  if (unit >= units_.size()) {
    throw InvalidArgument("gather: unit " + std::to_string(unit) + " of " +
                          std::to_string(units_.size()));
  }
  if (residency_ != nullptr) residency_->gather(unit);
  if (sharded_ && gathered_depth_[unit]++ == 0) ++gather_version_[unit];
}

void ParameterStore::release(std::size_t unit) {
  if (unit >= units_.size()) {
    throw InvalidArgument("release: unit " + std::to_string(unit) + " of " +
                          std::to_string(units_.size()));
  }
  if (residency_ != nullptr) residency_->release(unit);
  if (sharded_ && gathered_depth_[unit] > 0 && --gathered_depth_[unit] == 0) {
    hold_compute(unit_compute_[unit].size() * sizeof(BFloat16), false);
    unit_compute_[unit] = {};
    for (std::size_t p = units_[unit].first; p < units_[unit].end; ++p) {
      if (widened_.empty() || widened_[p].empty()) continue;
      hold_compute(widened_[p].size() * sizeof(float), false);
      widened_[p] = {};
    }
  }
}

const BFloat16* ParameterStore::compute_value(std::size_t index) {
  if (index >= specs_.size()) {
    throw InvalidArgument("compute_value: parameter " + std::to_string(index) + " of " +
                          std::to_string(specs_.size()));
  }
  const float* values = value(index);  // refuses a unit that is not gathered
  if (compute_version_.empty()) compute_version_.assign(specs_.size(), 0);
  BFloat16* copy = nullptr;
  const std::uint64_t version = copy_version(index);
  if (sharded_) {
    const std::size_t u = unit_of_[index];
    std::vector<BFloat16>& unit_copy = unit_compute_[u];
    if (unit_copy.empty()) {
      unit_copy.resize(units_[u].count);
      hold_compute(unit_copy.size() * sizeof(BFloat16), true);
    }
    copy = unit_copy.data() + (offsets_[index] - units_[u].offset);
  } else {
    if (compute_.empty()) {
      compute_.resize(parameter_elements_);
      hold_compute(compute_.size() * sizeof(BFloat16), true);
    }
    copy = compute_.data() + offsets_[index];
  }
  if (compute_version_[index] != version) {
    kernels::to_bf16({values, counts_[index]}, {copy, counts_[index]});
    compute_version_[index] = version;
  }
  return copy;
}

const float* ParameterStore::compute_float(std::size_t index) {
  const BFloat16* rounded = compute_value(index);  // checks the index and the unit
  if (widened_.empty()) {
    widened_.resize(specs_.size());
    widened_version_.assign(specs_.size(), 0);
  }
  std::vector<float>& copy = widened_[index];
  if (copy.size() != counts_[index]) {
    copy.resize(counts_[index]);
    hold_compute(copy.size() * sizeof(float), true);
    widened_version_[index] = 0;
  }
  const std::uint64_t version = copy_version(index);
  if (widened_version_[index] != version) {
    kernels::to_float({rounded, counts_[index]}, copy);
    widened_version_[index] = version;
  }
  return copy.data();
}

std::uint64_t ParameterStore::copy_version(std::size_t index) const {
  return sharded_ ? gather_version_[unit_of_[index]] : values_version_;
}

void ParameterStore::hold_compute(std::size_t bytes, bool more) {
  compute_bytes_ = more ? compute_bytes_ + bytes : compute_bytes_ - bytes;
  compute_peak_bytes_ = std::max(compute_peak_bytes_, compute_bytes_);
}

void ParameterStore::no_gradients(std::size_t index) const {
  throw InvalidArgument("parameter '" + specs_.at(index).name +
                        "': this store keeps no gradients (it only computes forward)");
}

void ParameterStore::shard(UnitResidency* residency) {
  residency_ = residency;
  sharded_ = true;
  values_ = {};
  grads_ = {};
  compute_ = {};
  compute_bytes_ = 0;
  compute_version_.clear();
  widened_.clear();
  widened_version_.clear();
  unit_compute_.assign(units_.size(), {});
  gathered_depth_.assign(units_.size(), 0);
  gather_version_.assign(units_.size(), 0);
}

void ParameterStore::initialize(std::uint64_t seed) {
  initialize_on_use(seed);
  materialize();
}

void ParameterStore::zero_grads() {
  materialize();
  std::fill(grads_.begin(), grads_.end(), 0.0F);
}

}  // namespace shardwise::train
