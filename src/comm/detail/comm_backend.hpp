#pragma once
// What a backend implements. The Communicator validates every call, hands the backend an
// OpRequest and counts the bytes once the Work succeeds, so every backend validates and counts
// alike. A backend runs operations of one communicator in the order they are started.

#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "op_request.hpp"
#include "shardwise/comm/work.hpp"

namespace shardwise::detail {

class CommBackend {
 public:
  virtual ~CommBackend() = default;

  [[nodiscard]] virtual Rank rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  [[nodiscard]] virtual std::string name() const = 0;
  // The largest message tag the backend takes (MPI guarantees only 32767: MPI_TAG_UB).
  [[nodiscard]] virtual int max_tag() const { return std::numeric_limits<int>::max(); }
  [[nodiscard]] virtual const std::vector<Rank>& world_ranks() const = 0;

  // Starts a validated operation. A blocking call waits on the Work at once, so a backend may
  // run it to completion before returning when nothing else is in flight.
  virtual Work start(OpRequest request) = 0;

  // Runs a validated blocking operation to completion; throws CommError for its failure. A
  // backend that can run it on the calling thread saves the Work's allocation and signalling.
  virtual void run_blocking(const OpRequest& request) { start(request).wait(); }

  // Collective over this communicator: every member calls it with its own group (ranks of
  // this communicator, in order; nullopt for a member left out) and the same `agreement`
  // text, which members that disagree are told of. Returns the new group's backend, or
  // nullptr for a member left out.
  virtual std::unique_ptr<CommBackend> split(const std::optional<std::vector<Rank>>& members,
                                             const std::string& agreement,
                                             const CommOptions& options) = 0;

  virtual void abort(const std::string& reason) = 0;

  virtual bool with_peer_buffers(
      const void* /*mine*/, const Group& /*group*/,
      const std::function<void(const std::vector<const void*>&)>& /*work*/,
      const CommOptions& /*options*/) {
    return false;
  }
};

}  // namespace shardwise::detail
