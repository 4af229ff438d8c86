// SPDX-License-Identifier: Apache-2.0
// flowdsl's Python module: graphs built node by node or loaded from JSON, on the caller's
// tensors (no copies), validated, cached and launched on the caller's stream by a Runtime. Each
// topic binds itself (bindings.hpp); the errors come first, as the others raise them.
#include <nanobind/nanobind.h>

#include "bindings.hpp"

NB_MODULE(_flowdsl, m) {
  using namespace flowdsl::python;
  m.doc() = "flowdsl: explicit CUDA graphs, validated, cached by topology and updated in place.";
  m.attr("__version__") = FLOWDSL_VERSION;
  bind_errors(m);
  bind_graph(m);
  bind_runtime(m);
  bind_family(m);
  bind_profiler(m);
#ifdef FLOWDSL_PYTHON_BENCH
  bind_bench(m);  // in-tree builds only (python/CMakeLists.txt)
#endif
}
