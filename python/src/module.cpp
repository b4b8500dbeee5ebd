// shardwise._shardwise: the C++ library's meshes, specs, shardings, strategies and planner for
// Python. The package shardwise (python/shardwise/__init__.py) re-exports it with the JAX and
// PyTorch interop written in Python.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <exception>
#include <string>
#include <typeinfo>

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
  // A safety net: every str and value the bindings take is converted by conversions.hpp, which
  // names the argument; a conversion that still fails in nb::cast (a std::bad_cast, whose text
  // is "std::bad_cast") is bad input too, an InvalidArgument, never a RuntimeError.
  nb::register_exception_translator(
      [](const std::exception_ptr& thrown, void* invalid_argument) {
        try {
          std::rethrow_exception(thrown);
        } catch (const std::bad_cast&) {
          PyErr_SetString(static_cast<PyObject*>(invalid_argument),
                          "an argument could not be converted to the value shardwise expects "
                          "(a str that is not valid text, such as a lone surrogate, or a value "
                          "of another type)");
        }
      },
      invalid.ptr());
  // For the package's tests of the translator above: nb::cast as the bindings never do.
  m.def(
      "_cast_to_text", [](nb::handle value) { return nb::cast<std::string>(value); },
      nb::arg("value"));
  shardwise::python::bind_core(m);
  shardwise::python::bind_strategy(m);
  shardwise::python::bind_plan(m);
}
