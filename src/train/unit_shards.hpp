#pragma once
// Where each rank's shards of a store's parameters lie, unit by unit, under ZeRO: the blocks
// the parameters' shardings give it (NamedSharding's index of its device on the group's mesh).
//
// A rank's slice is one flat buffer: unit after unit, each unit's chunk holding its block of
// every parameter of the unit at a fixed slot as large as the parameter's shard shape (zeros
// after a smaller block). Chunks are the same size on every rank, so one all-gather of a unit's
// chunks gives every block, and one reduce-scatter of a packed unit gives each rank its blocks.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "shardwise/train/parameter_shardings.hpp"
#include "shardwise/train/parameter_store.hpp"

namespace shardwise::train::detail {

class UnitShards {
 public:
  // Throws what ParameterShardings::validate throws, and InvalidArgument where the shardings'
  // group size is not `members`.
  UnitShards(const ParameterStore& store, const ParameterShardings& shardings, int members);

  [[nodiscard]] int members() const { return members_; }
  // One member's part of unit u: chunk(u) elements at chunk_offset(u) of its slice.
  [[nodiscard]] std::size_t chunk(std::size_t unit) const { return chunks_[unit]; }
  [[nodiscard]] std::size_t chunk_offset(std::size_t unit) const { return chunk_offsets_[unit]; }
  [[nodiscard]] std::size_t slice_size() const { return slice_size_; }
  // Where parameter p's block starts in its unit's chunk.
  [[nodiscard]] std::size_t slot(std::size_t parameter) const { return slots_[parameter]; }
  // Where parameter p's block starts in a member's slice.
  [[nodiscard]] std::size_t slice_offset(std::size_t parameter) const;
  // Elements of member m's block of parameter p (at most its slot's size).
  [[nodiscard]] std::size_t block_elements(std::size_t parameter, int member) const;
  // Member m's block of parameter p as ranges of the parameter's dimensions (the store's shape
  // of it): its whole shape where the parameter is replicated.
  [[nodiscard]] ShardIndex block_box(std::size_t parameter, int member) const;
  // Whether member m's block of p is the first copy of those elements (a replicated parameter
  // is first on member 0): the block that counts once in a sum over the group.
  [[nodiscard]] bool first_copy(std::size_t parameter, int member) const;

  // Calls run(offset in the parameter, offset in the block, length) for every contiguous run
  // of member m's block of parameter p, in order.
  template <class Run>
  void for_each_run(std::size_t parameter, int member, Run&& run) const;

  // Member m's chunk of unit u from the unit's full elements (`full` points at the unit's first
  // element); the slots' padding becomes zeros.
  void pack(std::size_t unit, int member, const float* full, float* chunk) const;
  // Every member's chunk, one after the other (what a reduce-scatter splits).
  void pack_all(std::size_t unit, const float* full, float* packed) const;
  // The unit's full elements from every member's chunk (what an all-gather gives), each
  // element from its first copy.
  void unpack(std::size_t unit, const float* packed, float* full) const;

 private:
  struct Split {
    int dimension = -1;              // -1: replicated
    std::size_t outer = 1;           // elements before the split dimension (product of sizes)
    std::size_t inner = 1;           // elements of one index of it (product of the later sizes)
    std::size_t length = 1;          // its size
    std::vector<IndexRange> ranges;  // per member
  };

  const ParameterStore& store_;
  int members_ = 1;
  std::vector<Split> splits_;
  std::vector<std::size_t> slots_;
  std::vector<std::size_t> chunks_;
  std::vector<std::size_t> chunk_offsets_;
  std::size_t slice_size_ = 0;
};

template <class Run>
void UnitShards::for_each_run(std::size_t parameter, int member, Run&& run) const {
  const Split& split = splits_[parameter];
  if (split.dimension < 0) {
    run(std::size_t{0}, std::size_t{0}, store_.count(parameter));
    return;
  }
  const IndexRange range = split.ranges[static_cast<std::size_t>(member)];
  const auto start = static_cast<std::size_t>(range.start);
  const auto rows = static_cast<std::size_t>(range.stop - range.start);
  if (rows == 0) return;
  const std::size_t length = rows * split.inner;
  for (std::size_t o = 0; o < split.outer; ++o) {
    run((o * split.length + start) * split.inner, o * length, length);
  }
}

}  // namespace shardwise::train::detail
