#include "shardwise/comm/backend_registry.hpp"

#include <deque>
#include <mutex>

#include "shardwise/comm/run_local.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

struct Registry {
  std::mutex mutex;
  // A deque: entries never move, so pointers handed out stay valid as others register.
  std::deque<BackendInfo> backends;
};

Registry& registry() {
  static Registry* instance = [] {
    auto* r = new Registry;  // never destroyed: backends may be looked up during exit
    BackendInfo local;
    local.name = "local";
    local.launched = [] { return false; };
    local.run = [](int*, char***, int local_ranks, const std::function<void(Communicator&)>& fn) {
      run_local(local_ranks, fn);
    };
    r->backends.push_back(std::move(local));
    return r;
  }();
  return *instance;
}

}  // namespace

bool register_backend(BackendInfo backend) {
  if (backend.name.empty()) throw InvalidArgument("register_backend: the backend has no name");
  if (!backend.run) {
    throw InvalidArgument("register_backend: backend '" + backend.name + "' has no run function");
  }
  if (!backend.launched) backend.launched = [] { return false; };
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const BackendInfo& known : r.backends) {
    if (known.name == backend.name) return false;
  }
  r.backends.push_back(std::move(backend));
  return true;
}

const BackendInfo* find_backend(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const BackendInfo& known : r.backends) {
    if (known.name == name) return &known;
  }
  return nullptr;
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const BackendInfo* backend : registered_backends()) names.push_back(backend->name);
  return names;
}

std::vector<const BackendInfo*> registered_backends() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<const BackendInfo*> all;
  for (const BackendInfo& known : r.backends) all.push_back(&known);
  return all;
}

}  // namespace shardwise
