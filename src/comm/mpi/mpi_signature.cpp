#include "mpi_signature.hpp"

#include <algorithm>

namespace shardwise::detail {
namespace {

std::uint64_t fnv(std::uint64_t h, std::uint64_t value) {
  for (int byte = 0; byte < 8; ++byte) {
    h = (h ^ ((value >> (8 * byte)) & 0xffU)) * 1099511628211ULL;
  }
  return h;
}

constexpr std::uint64_t kFnvStart = 1469598103934665603ULL;

// One block of an all_to_allv: `count` elements from member `from` to member `to`.
std::uint64_t block_hash(std::size_t from, std::size_t to, std::size_t count) {
  return fnv(fnv(fnv(kFnvStart, from), to), count);
}

bool is_all_to_allv(std::uint8_t op) { return op == static_cast<std::uint8_t>(CommOp::kAllToAllv); }

bool is_reduction(std::uint8_t op) {
  return op == static_cast<std::uint8_t>(CommOp::kAllReduce) ||
         op == static_cast<std::uint8_t>(CommOp::kReduceScatter);
}

}  // namespace

MpiSignature signature_of(const OpRequest& request, int member) {
  MpiSignature s;
  s.op = static_cast<std::uint8_t>(request.op);
  s.dtype = static_cast<std::uint8_t>(request.dtype);
  s.reduce = static_cast<std::uint8_t>(request.reduce);
  s.root = request.root;
  s.blocking = request.blocking ? 1 : 0;
  std::uint64_t digest = kFnvStart;
  for (const CoalescedBuffer& b : request.buffers) {
    s.count += b.count;
    digest = fnv(digest, b.count);
  }
  if (!request.buffers.empty()) {
    const CoalescedBuffer& b = request.buffers.front();
    const std::size_t bytes = b.count * size_in_bytes(request.dtype);
    const bool gathered_in_place =
        request.op == CommOp::kAllGather &&
        b.in == static_cast<const std::byte*>(b.out) + static_cast<std::size_t>(member) * bytes;
    s.in_place = (b.in == b.out || gathered_in_place) ? 1 : 0;
  }
  if (request.op == CommOp::kAllToAllv) {
    // What this member sends each peer and what it expects from each, as sums of the blocks'
    // hashes: over the group the two sums are equal where every receiver expects what its sender
    // sends (MPI itself does not check; a receiver expecting more would pass unnoticed).
    const auto self = static_cast<std::size_t>(member);
    std::uint64_t sends = 0, expects = 0;
    for (std::size_t j = 0; j < request.send.counts.size(); ++j) {
      sends += block_hash(self, j, request.send.counts[j]);
    }
    for (std::size_t j = 0; j < request.receive.counts.size(); ++j) {
      expects += block_hash(j, self, request.receive.counts[j]);
    }
    s.count = sends;
    s.digest = expects;
    return s;
  }
  std::vector<std::pair<int, int>> pairs;
  for (const PermutePair& p : request.pairs) pairs.emplace_back(p.source, p.destination);
  std::sort(pairs.begin(), pairs.end());
  for (const auto& [source, destination] : pairs) {
    digest = fnv(fnv(digest, static_cast<std::uint64_t>(source)),
                 static_cast<std::uint64_t>(destination));
  }
  s.digest = digest;
  return s;
}

MpiSignature split_signature(const std::string& agreement) {
  MpiSignature s;
  s.op = 0xff;
  std::uint64_t digest = kFnvStart;
  for (const char c : agreement) digest = fnv(digest, static_cast<unsigned char>(c));
  s.digest = digest;
  return s;
}

std::string describe(const MpiSignature& signature) {
  if (signature.op == 0xff) return "split";
  const auto op = static_cast<CommOp>(signature.op);
  if (is_all_to_allv(signature.op)) {
    return to_string(op) + " of " + to_string(static_cast<DType>(signature.dtype));
  }
  std::string text = to_string(op) + " of " + std::to_string(signature.count) + " " +
                     to_string(static_cast<DType>(signature.dtype));
  if (is_reduction(signature.op)) {
    text += " (" + to_string(static_cast<ReduceOp>(signature.reduce)) + ")";
  }
  if (op == CommOp::kBroadcast) text += " from root " + std::to_string(signature.root);
  if (op == CommOp::kAllToAll && signature.in_place != 0) text += " in place";
  return text;
}

std::optional<std::string> mismatch(const std::vector<MpiSignature>& signatures, const Group& group,
                                    const std::string& operation) {
  const MpiSignature& first = signatures.front();
  if (is_all_to_allv(first.op)) {
    std::uint64_t sent = 0, expected = 0;
    for (std::size_t i = 0; i < signatures.size(); ++i) {
      const MpiSignature& s = signatures[i];
      if (s.op != first.op || s.dtype != first.dtype) {
        return operation + " over " + group.to_string() + ": rank " +
               std::to_string(group.ranks()[i]) + " called " + describe(s) + " where rank " +
               std::to_string(group.ranks()[0]) + " called " + describe(first);
      }
      sent += s.count;
      expected += s.digest;
    }
    if (sent == expected) return std::nullopt;
    return operation + " over " + group.to_string() +
           ": the counts its members expect to receive are not those their peers send";
  }
  for (std::size_t i = 1; i < signatures.size(); ++i) {
    const MpiSignature& s = signatures[i];
    // In place is the member's own business except for all-to-all, where MPI needs all or none.
    const bool in_place_matters = first.op == static_cast<std::uint8_t>(CommOp::kAllToAll);
    const bool same = s.op == first.op && s.dtype == first.dtype && s.root == first.root &&
                      s.count == first.count && s.digest == first.digest &&
                      (!is_reduction(first.op) || s.reduce == first.reduce) &&
                      (!in_place_matters || s.in_place == first.in_place);
    if (same) continue;
    const bool pairs_differ = s.op == first.op && s.count == first.count &&
                              s.digest != first.digest &&
                              first.op == static_cast<std::uint8_t>(CommOp::kPpermute);
    return operation + " over " + group.to_string() + ": rank " + std::to_string(group.ranks()[i]) +
           " called " + describe(s) + " where rank " + std::to_string(group.ranks()[0]) +
           " called " + describe(first) + (pairs_differ ? " with other pairs" : "");
  }
  return std::nullopt;
}

}  // namespace shardwise::detail
