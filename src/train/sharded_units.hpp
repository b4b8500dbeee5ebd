#pragma once
// ZeRO-3's parameter residency (FSDP's sharded units). Each rank keeps its blocks of every
// parameter as the parameter shardings give them (UnitShards' slice): values and averaged
// gradients (the trainer adds the optimizer state). A unit's full values exist only between the
// model's gather and release, all-gathered over the shard group and unpacked; once the first pass
// of a kind has recorded the order in which the model gathers its units, each gather starts the
// next unit's all-gather, so it moves while this unit computes. A unit's full gradients exist from
// their first use in backward until their reduce-scatter into this rank's slice has finished; at
// most two reduce-scatters are in flight. Freed buffers are kept for the next unit of the same
// size (every layer's unit is one), so that a step allocates, faults in and zeroes nothing new
// once the first has run; what is kept and what is in use together never exceed the most in
// use at once (peak_gathered_bytes).

#include <cstddef>
#include <deque>
#include <map>
#include <span>
#include <vector>

#include "shardwise/comm/communicator.hpp"
#include "shardwise/train/parameter_shardings.hpp"
#include "shardwise/train/parameter_store.hpp"
#include "unit_shards.hpp"

namespace shardwise::train::detail {

class ShardedUnits final : public UnitResidency {
 public:
  // Copies this rank's blocks out of `store`'s full values and shards the store. Without
  // `prefetch` every gather waits for its own all-gather. Throws what UnitShards throws.
  // Gradients are reduce-scattered in `reduce_dtype` (float32, or bf16: rounded on the way and
  // widened into the slice), and units gathered in `gather_dtype` (float32, or bf16: each
  // member's chunk rounded, the gathered unit's values the roundings widened).
  ShardedUnits(Communicator& comm, const Group& shards, ParameterStore& store,
               const ParameterShardings& shardings, bool prefetch, DType reduce_dtype = DType::kF32,
               DType gather_dtype = DType::kF32);
  // Waits for what is still in flight (peers may still be reading this rank's slices) and
  // detaches from the store, which is left without values.
  ~ShardedUnits() override;
  ShardedUnits(const ShardedUnits&) = delete;
  ShardedUnits& operator=(const ShardedUnits&) = delete;

  // One pass of the model: forward, and backward where with_grads.
  void begin_pass(bool with_grads);
  // Gradients of elements [begin, end) are final: the units inside start their reduce-scatter.
  // A range that covers part of a unit, or a unit twice, is an InvalidArgument naming it.
  void gradients_ready(std::size_t begin, std::size_t end);
  // Reduce-scatters the units not announced (with gradients), waits for everything in flight
  // and frees every gathered buffer. A unit the model left gathered is an InvalidArgument.
  void end_pass();
  // After a failure inside a pass: waits for what is in flight, ignoring its errors, and frees
  // everything, so that a next pass starts clean.
  void abandon_pass() noexcept;

  void gather(std::size_t unit) override;
  void release(std::size_t unit) override;
  float* values(std::size_t unit) override;
  float* grads(std::size_t unit) override;

  // This rank's slices, laid out as shards() says.
  [[nodiscard]] std::span<float> values_slice() { return values_slice_; }
  [[nodiscard]] std::span<float> grads_slice() { return grads_slice_; }
  [[nodiscard]] const UnitShards& shards() const { return shards_; }
  [[nodiscard]] std::size_t slice_size() const { return values_slice_.size(); }
  [[nodiscard]] int member() const { return member_; }

  // Bytes of gathered values and full gradients held now, and the most held at once.
  [[nodiscard]] std::size_t gathered_bytes() const { return gathered_bytes_; }
  [[nodiscard]] std::size_t peak_gathered_bytes() const { return peak_gathered_bytes_; }
  // Bytes of freed buffers kept for reuse.
  [[nodiscard]] std::size_t kept_bytes() const { return kept_bytes_; }

  // Gathers of the last pass that found their unit prefetched, and that waited for a gather.
  [[nodiscard]] std::size_t prefetched_gathers() const { return prefetched_gathers_; }
  [[nodiscard]] std::size_t waiting_gathers() const { return waiting_gathers_; }

  // Every parameter in the store's flat layout (collective over the shard group, outside a
  // pass).
  [[nodiscard]] std::vector<float> full_values();

 private:
  struct Unit {
    std::vector<float> gathering;  // every member's chunk, while its all-gather runs
    // The same in bf16 where units are gathered in bf16, and this member's rounded chunk.
    std::vector<BFloat16> gathering_bf16, mine_bf16;
    std::vector<float> values;  // the full unit while gathered; empty otherwise
    Work prefetch;
    bool prefetching = false;
    int users = 0;
    std::vector<float> grads;     // the full unit's gradients during backward
    std::vector<float> reducing;  // every member's chunk of them, while the reduce-scatter runs
    // The same in bf16 where gradients are reduced in bf16, and this rank's averaged chunk.
    std::vector<BFloat16> reducing_bf16, reduced_bf16;
    Work reduce;
    bool reduced = false;  // its reduce-scatter was started in this pass
  };

  // Every member's chunk of the unit (what an all-gather or a reduce-scatter moves).
  [[nodiscard]] std::size_t packed(std::size_t unit) const;
  [[nodiscard]] float* my_chunk(std::vector<float>& slice, std::size_t unit);
  // `buffer` gets `elements` floats, a kept one where there is one of that size; zeroed only
  // where `zeroed` (what a gather, an unpack or a pack writes whole is not).
  void allocate(std::vector<float>& buffer, std::size_t elements, bool zeroed);
  // Starts a unit's all-gather in the gathers' type; finish_gather unpacks the gathered chunks
  // into its full values.
  [[nodiscard]] Work start_gather(std::size_t unit);
  void finish_gather(std::size_t unit);
  void free(std::vector<float>& buffer);
  // Counts a unit's bf16 gather buffers among the gathered bytes (held or released); the second
  // releases them.
  void hold_bf16_staging(const Unit& unit, bool more);
  void free_bf16_staging(Unit& unit);
  void start_reduce(std::size_t unit);
  void finish_oldest_reduce();
  void check_unit(std::size_t unit, const char* what) const;

  Communicator& comm_;
  Group group_;
  ParameterStore& store_;
  int member_ = 0;
  bool prefetch_ = true;
  DType reduce_dtype_ = DType::kF32;
  DType gather_dtype_ = DType::kF32;
  UnitShards shards_;
  std::vector<float> values_slice_;
  std::vector<float> grads_slice_;
  std::vector<Unit> units_;
  std::deque<std::size_t> reducing_;

  // The order of gathers of the first pass of each kind (index: with_grads).
  std::vector<std::size_t> order_[2];
  bool recorded_[2] = {false, false};
  bool in_pass_ = false;
  bool with_grads_ = false;
  bool following_ = false;  // this pass has gathered in the recorded order so far
  std::size_t position_ = 0;

  std::size_t prefetched_gathers_ = 0;
  std::size_t waiting_gathers_ = 0;
  std::size_t gathered_bytes_ = 0;
  std::size_t peak_gathered_bytes_ = 0;
  // Freed buffers by their size in floats, and their bytes.
  std::map<std::size_t, std::vector<std::vector<float>>> kept_;
  std::size_t kept_bytes_ = 0;
};

}  // namespace shardwise::train::detail
