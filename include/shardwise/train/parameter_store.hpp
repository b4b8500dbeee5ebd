#pragma once
// A model's named parameters in one flat buffer (as llm.c keeps them), each a view: an offset
// and a size. Gradients live in a second buffer of the same layout. Initial values depend only
// on a parameter's name, the element's global index and the seed, so every layout of the same
// model starts from the same global parameters.
//
// Parameters come in units (FSDP's units: a layer's parameters, used together). Under ZeRO-3 a
// trainer shards the store: the full buffers go away, and a unit's values are readable only
// between the model's gather(unit) and release(unit), its gradients only during backward.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "shardwise/core/element_type.hpp"
#include "shardwise/core/half.hpp"
#include "shardwise/core/shape.hpp"
#include "shardwise/strategy/mesh_axes.hpp"

namespace shardwise::train {

// How a parameter starts: normal(0, std), all zeros or all ones.
struct ParameterInit {
  enum class Kind { kNormal, kZeros, kOnes };
  Kind kind = Kind::kNormal;
  float std = 0.02F;
};

// How the ranks' gradients of a parameter combine into its gradient. Every rank of the batch's
// roles (data, fsdp, expert) saw other sequences: their gradients are averaged. A block of
// experts the expert axis splits is averaged over the data axes only (its expert-data group):
// the dispatch brought it every expert rank's tokens already, so its gradient sums them, and the
// trainer divides it by the expert degree instead. Model ranks that hold one same block
// (SharedRows, placement.hpp) sum their parts of it.
struct GradientReduction {
  std::vector<AxisRole> averaged_over = {AxisRole::kBatch, AxisRole::kParameterShard,
                                         AxisRole::kExperts};
  // The model ranks holding this same block: 1 but for SharedRows; one of them counts it in the
  // gradient norm.
  std::size_t model_sharers = 1;
  friend bool operator==(const GradientReduction&, const GradientReduction&) = default;
};

struct ParameterSpec {
  std::string name;  // "transformer.h.0.attn.c_attn.weight"
  Shape shape;
  std::vector<std::string> logical_axes;  // one per dimension ("embed", "mlp", ...), may be empty
  ParameterInit init;
  bool weight_decay = true;  // false for norms and biases
  // The unit it is gathered with under ZeRO-3 ("h.0"); consecutive parameters with the same
  // name form one unit. Parameters without one form a unit together where they are consecutive.
  std::string unit;
  // Where this rank's part lies in the whole parameter, when a layout splits it for good
  // (tensor parallelism): the whole's shape, and one range per dimension; `shape` (and
  // `logical_axes`) are then the part's. Empty: the rank holds the whole parameter.
  Shape global_shape = {};
  ShardIndex block = {};
  // A second copy of a parameter another pipeline stage holds (a tied embedding used again by
  // the last stage's head): the model sums its gradient into the first copy's, so it counts
  // once, there, in the gradient norm.
  bool tied_copy = false;
  GradientReduction gradient = {};

  // The whole parameter's shape: global_shape where a block is set, else shape.
  [[nodiscard]] const Shape& whole_shape() const { return block.empty() ? shape : global_shape; }
};

// A contiguous run of parameters [first, end), elements [offset, offset + count) of the flat
// layout.
struct ParameterUnit {
  std::string name;
  std::size_t first = 0;
  std::size_t end = 0;
  std::size_t offset = 0;
  std::size_t count = 0;
};

// Where a sharded store's units are while they are gathered (a ZeRO-3 trainer provides it).
class UnitResidency {
 public:
  virtual ~UnitResidency() = default;
  // Makes the unit's values readable (nested: one release per gather).
  virtual void gather(std::size_t unit) = 0;
  virtual void release(std::size_t unit) = 0;
  // The unit's gathered values (nullptr while it is not gathered) and its full gradients
  // (created as zeros on first use in a pass; nullptr outside a pass with gradients).
  virtual float* values(std::size_t unit) = 0;
  virtual float* grads(std::size_t unit) = 0;
};

class ParameterStore {
 public:
  // The element type of the parameters, their gradients and the optimizer's moments: the
  // masters a mixed-precision step keeps (float32; a lower precision computes from copies of
  // them). Collectives, pipeline messages and checkpoints take their dtype from it.
  using Element = float;
  static constexpr DType kElementType = dtype_of<Element>();

  // Lays the parameters out in order. Names must be unique, shapes non-negative with a checked
  // element count, and a block (where set) one range per dimension of the whole shape, inside
  // it and of `shape`'s sizes; otherwise an InvalidArgument naming the parameter. Without
  // gradients (a model that only computes forward, a decoder) the gradient buffer is never made.
  enum class Gradients { kKept, kNone };
  explicit ParameterStore(std::vector<ParameterSpec> specs, Gradients gradients = Gradients::kKept);

  [[nodiscard]] const std::vector<ParameterSpec>& specs() const { return specs_; }
  // Elements of all parameters, and of the buffers (none while sharded).
  [[nodiscard]] std::size_t parameter_elements() const { return parameter_elements_; }
  [[nodiscard]] std::size_t size() const { return sharded_ ? 0 : parameter_elements_; }

  // The parameter called `name` (an InvalidArgument naming it where there is none).
  [[nodiscard]] std::size_t index_of(const std::string& name) const;
  [[nodiscard]] std::size_t offset(std::size_t index) const { return offsets_[index]; }
  [[nodiscard]] std::size_t count(std::size_t index) const { return counts_[index]; }

  [[nodiscard]] const std::vector<ParameterUnit>& units() const { return units_; }
  [[nodiscard]] std::size_t unit_of(std::size_t index) const { return unit_of_[index]; }

  // The whole buffers (empty while sharded).
  // The writable buffers: a caller may change the values (the compute copies are made again).
  [[nodiscard]] std::span<float> values() {
    materialize();
    mark_values_changed();
    return values_;
  }
  [[nodiscard]] std::span<const float> values() const {
    materialize();
    return values_;
  }
  [[nodiscard]] std::span<float> grads() {
    materialize();
    return grads_;
  }
  [[nodiscard]] std::span<const float> grads() const {
    materialize();
    return grads_;
  }
  // One parameter's values and gradients. While sharded, an InvalidArgument names the parameter and
  // its unit where that unit is not gathered (values) or not in backward (gradients).
  [[nodiscard]] float* value(std::size_t index) {
    if (sharded_) return sharded_value(index);
    materialize();
    return values_.data() + offsets_[index];
  }
  [[nodiscard]] float* grad(std::size_t index) {
    if (sharded_) return sharded_grad(index);
    materialize();
    if (gradients_ == Gradients::kNone) no_gradients(index);
    return grads_.data() + offsets_[index];
  }

  // What a model calls around its use of a unit (no-ops unless sharded).
  void gather(std::size_t unit);
  void release(std::size_t unit);

  // Parameter `index`'s values rounded to bf16 (to nearest, ties to even): the copy the products
  // of bf16 mixed precision read. Made on first use, and again after the values changed (the
  // writable values(), or mark_values_changed after a write through value(index)) or, while
  // sharded, after its unit was gathered anew; freed when a sharded unit is released. The same
  // rules as value(index) for a unit that is not gathered.
  [[nodiscard]] const BFloat16* compute_value(std::size_t index);
  // The same rounding widened back to float32: what bf16 mixed precision reads where a
  // parameter is not a product's weight (norms, biases, positions), so that every use of a
  // parameter sees one value. Kept and freed by the rules of compute_value.
  [[nodiscard]] const float* compute_float(std::size_t index);
  // Says the values were written through value(index): the compute copies are stale.
  void mark_values_changed() { ++values_version_; }
  // Bytes of compute copies held now, and the most held at once.
  [[nodiscard]] std::size_t compute_bytes() const { return compute_bytes_; }
  [[nodiscard]] std::size_t compute_peak_bytes() const { return compute_peak_bytes_; }

  // Hands the values to `residency` (which has copied what it keeps) and frees both buffers;
  // nullptr detaches it again, leaving the store without values (a ZeRO-3 trainer's values
  // live in its shards: Trainer::full_parameters() gathers them while it lives).
  void shard(UnitResidency* residency);
  [[nodiscard]] bool sharded() const { return sharded_; }

  // Fills every parameter from its init rule, the seed and each element's index in the whole
  // parameter (so a rank holding a block draws exactly the whole's values there).
  void initialize(std::uint64_t seed);
  // The same, done when the buffers are first used; a ZeRO-3 trainer that shards the store
  // first draws its slices alone (initial_values), so no rank ever holds all its parameters.
  void initialize_on_use(std::uint64_t seed);
  // Whether the full buffers were ever allocated (a ZeRO-3 trainer that draws its slices alone
  // never allocates them).
  [[nodiscard]] bool ever_allocated() const { return ever_allocated_; }
  // Whether the values are still to be drawn (initialize_on_use, buffers not used yet).
  [[nodiscard]] bool initialization_pending() const { return pending_seed_ && values_.empty(); }
  // Elements [from, from + count) of parameter p as initialize_on_use's seed draws them, into
  // `out` (InvalidArgument without a pending initialisation).
  void initial_values(std::size_t p, std::size_t from, std::size_t count, float* out) const;
  void zero_grads();

 private:
  float* sharded_value(std::size_t index);
  float* sharded_grad(std::size_t index);
  // Allocates the buffers on first use (and draws the values where initialisation is pending).
  void materialize() const;

  std::vector<ParameterSpec> specs_;
  std::vector<ParameterUnit> units_;
  std::vector<std::size_t> unit_of_;
  UnitResidency* residency_ = nullptr;
  bool sharded_ = false;
  std::vector<std::size_t> offsets_;
  std::vector<std::size_t> counts_;
  std::size_t parameter_elements_ = 0;
  // Allocated on first use; mutable so that a const view can be the first.
  mutable std::vector<float> values_;
  mutable std::vector<float> grads_;
  Gradients gradients_ = Gradients::kKept;
  [[noreturn]] void no_gradients(std::size_t index) const;
  std::optional<std::uint64_t> pending_seed_;
  // Compute copies: the whole layout's (unsharded) or each gathered unit's (sharded), and the
  // version of the values (unsharded) or the unit's gather (sharded) each parameter's copy is of.
  std::uint64_t values_version_ = 1;
  std::vector<BFloat16> compute_;
  std::vector<std::vector<BFloat16>> unit_compute_;
  std::vector<std::uint64_t> compute_version_;
  std::vector<std::vector<float>> widened_;  // compute_float's copies, by parameter
  std::vector<std::uint64_t> widened_version_;
  std::vector<std::size_t> gathered_depth_;    // nested gathers of each unit (sharded)
  std::vector<std::uint64_t> gather_version_;  // each unit's outermost gathers so far
  std::size_t compute_bytes_ = 0, compute_peak_bytes_ = 0;
  // Counts `bytes` more (or fewer) of copies held.
  void hold_compute(std::size_t bytes, bool more);
  // The version compute copies of parameter `index` are of now.
  [[nodiscard]] std::uint64_t copy_version(std::size_t index) const;
  mutable bool ever_allocated_ = false;
};

// The value a normal(0, 1) draw takes for element `index` of parameter `name` under `seed`:
// a counter-based generator, so any rank computes any element without the others.
[[nodiscard]] float standard_normal_at(std::uint64_t seed, const std::string& name,
                                       std::uint64_t index);

}  // namespace shardwise::train
