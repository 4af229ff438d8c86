// SPDX-License-Identifier: Apache-2.0
// Profiling from Python: Profiler, a context manager over flowdsl::Profiler (CUPTI).
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>

#include "bindings.hpp"

using namespace nanobind::literals;

namespace flowdsl::python {
namespace {

// A Profiler that can be closed (CUPTI allows one at a time) and used as a context manager.
struct PyProfiler {
  std::unique_ptr<Profiler> profiler;
  Profiler& get() {
    if (!profiler) usage("the profiler was closed");
    return *profiler;
  }
};

}  // namespace

void bind_profiler(nb::module_& m) {
  nb::class_<PyProfiler>(m, "Profiler",
                         "Launches graphs through a Runtime and records what each node did on the GPU (CUPTI); one at a\n"
                         "time. Use as a context manager, or close() it.")
      .def("__init__",
           [](PyProfiler* self, Runtime& runtime) { new (self) PyProfiler{std::make_unique<Profiler>(runtime)}; },
           "runtime"_a, nb::keep_alive<1, 2>())
      .def(
          "launch",
          [](PyProfiler& self, const PyGraph& g, nb::handle stream) { return launch_on(self.get(), g, stream); },
          "graph"_a, "stream"_a = nb::none(), "Launches and records the launch (as Runtime.launch).")
      .def("name", [](PyProfiler& self, const PyGraph& g, std::string name) { self.get().name(g.graph, std::move(name)); },
           "graph"_a, "name"_a, "Names the graph in the table and trace.")
      .def("report", [](PyProfiler& self) { return self.get().report(); },
           "Waits for the device, then the table: per node, its GPU time and share of the launch.")
      .def("trace", [](PyProfiler& self) { return trace_json(self.get().collect()); },
           "Waits for the device, then a Chrome/Perfetto trace (JSON text) of the launches and node spans.")
      .def("write_trace", [](PyProfiler& self, const std::string& path) { self.get().write_trace(path); }, "path"_a)
      .def_prop_ro("cupti_library", [](PyProfiler& self) { return self.get().cupti_library(); })
      .def("close", [](PyProfiler& self) { self.profiler.reset(); }, "Stops profiling (CUPTI disabled).")
      .def("__enter__", [](PyProfiler& self) -> PyProfiler& { return self; }, nb::rv_policy::reference)
      .def("__exit__", [](PyProfiler& self, nb::args) { self.profiler.reset(); });
}

}  // namespace flowdsl::python
