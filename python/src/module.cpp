// shardwise._shardwise: the C++ library's meshes, specs, shardings, strategies and planner for
// Python. The package shardwise (python/shardwise/__init__.py) re-exports it with the JAX and
// PyTorch interop written in Python.
#include <nanobind/nanobind.h>

#include "bindings.hpp"
#include "shardwise/core/error.hpp"

namespace nb = nanobind;

NB_MODULE(_shardwise, m) {
  m.doc() = "shardwise: JAX-exact layouts, the sharding strategies and the planner, in C++";
  // One hierarchy, as in C++; each a ValueError, since bad input is what raises them. The
  // subclasses' translators are registered after the base's, so that they are tried first.
  const nb::exception<shardwise::Error> error(m, "ShardwiseError", PyExc_ValueError);
  const nb::exception<shardwise::InvalidArgument> invalid(m, "InvalidArgument", error);
  const nb::exception<shardwise::ParseError> parse(m, "ParseError", error);
  const nb::exception<shardwise::ShardingError> sharding(m, "ShardingError", error);
  shardwise::python::bind_core(m);
  shardwise::python::bind_strategy(m);
  shardwise::python::bind_plan(m);
}
