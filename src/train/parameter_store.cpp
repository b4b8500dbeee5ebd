#include "shardwise/train/parameter_store.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "detail/splitmix.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::train {
namespace {

std::uint64_t name_hash(const std::string& name) {  // FNV-1a: stable across platforms
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// A uniform draw in (0, 1) from 53 random bits.
double unit(std::uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) / 9007199254740992.0;
}

}  // namespace

float standard_normal_at(std::uint64_t seed, const std::string& name, std::uint64_t index) {
  const std::uint64_t base = detail::splitmix64(seed ^ detail::splitmix64(name_hash(name)));
  const std::uint64_t a = detail::splitmix64(base ^ (2 * index));
  const std::uint64_t b = detail::splitmix64(base ^ (2 * index + 1));
  // Box-Muller, one of its two outputs.
  constexpr double kTwoPi = 6.283185307179586;
  return static_cast<float>(std::sqrt(-2.0 * std::log(unit(a))) * std::cos(kTwoPi * unit(b)));
}

ParameterStore::ParameterStore(std::vector<ParameterSpec> specs) : specs_(std::move(specs)) {
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
    const auto elements = static_cast<std::size_t>(num_elements(spec.shape));  // checked
    offsets_.push_back(total);
    counts_.push_back(elements);
    if (elements > (std::size_t{1} << 40) - total) {
      throw InvalidArgument("parameter '" + spec.name + "' takes the model past 2^40 elements");
    }
    total += elements;
  }
  parameter_elements_ = total;
  values_.assign(total, 0.0F);
  grads_.assign(total, 0.0F);
}

void ParameterStore::pad_to_multiple(std::size_t n) {
  if (n < 1) throw InvalidArgument("pad_to_multiple: n is 0");
  const std::size_t padded = (parameter_elements_ + n - 1) / n * n;
  values_.resize(std::max(padded, parameter_elements_), 0.0F);
  grads_.resize(values_.size(), 0.0F);
}

std::size_t ParameterStore::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].name == name) return i;
  }
  throw InvalidArgument("no parameter is called '" + name + "'");
}

void ParameterStore::initialize(std::uint64_t seed) {
  for (std::size_t p = 0; p < specs_.size(); ++p) {
    const ParameterSpec& spec = specs_[p];
    float* out = value(p);
    switch (spec.init.kind) {
      case ParameterInit::Kind::kZeros: std::fill(out, out + counts_[p], 0.0F); break;
      case ParameterInit::Kind::kOnes: std::fill(out, out + counts_[p], 1.0F); break;
      case ParameterInit::Kind::kNormal:
        for (std::size_t i = 0; i < counts_[p]; ++i) {
          out[i] = spec.init.std * standard_normal_at(seed, spec.name, i);
        }
        break;
    }
  }
}

void ParameterStore::zero_grads() { std::fill(grads_.begin(), grads_.end(), 0.0F); }

}  // namespace shardwise::train
