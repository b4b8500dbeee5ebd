#pragma once
// Runs a job's ranks on a backend so that an input error stays the user's error: a rank that
// finds its input bad (a file it reads, a value it checks) throws, the others then fail in the
// runtime waiting for it, and the caller hears the rank's message, not the runtime's.

#include <functional>

#include "shardwise/comm/backend_registry.hpp"
#include "shardwise/comm/communicator.hpp"

namespace shardwise::train {

// `body` on every rank `backend` starts (`ranks` threads, or the launcher's processes). A rank's
// Error that is not a CommError comes back as an InvalidArgument with its message (prefixed by
// "rank R: " where several ranks are threads of this process); a CommError alone, the runtime's.
void run_on_ranks(const BackendInfo& backend, int ranks,
                  const std::function<void(Communicator&)>& body);

}  // namespace shardwise::train
