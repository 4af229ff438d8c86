// SPDX-License-Identifier: Apache-2.0
// Launching from Python: Runtime and LaunchReport, and the streams a launch accepts (None, an int
// handle, torch, CuPy or anything with __cuda_stream__).
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <utility>

#include "bindings.hpp"
#include "tensors.hpp"

using namespace nanobind::literals;

namespace flowdsl::python {
namespace {

// An interned string, made once per name and kept for the process.
PyObject* interned(const char* text) { return PyUnicode_InternFromString(text); }

// obj.name, or null when it has no such attribute (other errors raise).
nb::object optional_attribute(nb::handle obj, PyObject* name) {
  PyObject* r = PyObject_GetAttr(obj.ptr(), name);
  if (r != nullptr) return nb::steal(r);
  if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw nb::python_error();
  PyErr_Clear();
  return nb::object();
}

// A stream handle given as a Python int (or an object's handle attribute): an address, so a
// negative or oversized number is refused as a usage error rather than a failed cast.
cudaStream_t stream_handle(nb::handle value) {
  if (!nb::isinstance<nb::int_>(value)) usage("stream: the handle is not an int (got " + nb::cast<std::string>(nb::str(value.type())) + ")");
  const unsigned long long handle = PyLong_AsUnsignedLongLong(value.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    usage("stream: " + nb::cast<std::string>(nb::str(value)) + " is not a stream handle (an address: 0 to 2^64 - 1)");
  }
  return reinterpret_cast<cudaStream_t>(static_cast<std::uintptr_t>(handle));
}

// The name of a launch kind as an interned string, made once per kind.
nb::handle kind_name(LaunchKind kind) {
  static PyObject* names[8] = {};
  const auto k = static_cast<std::size_t>(kind);
  if (k >= std::size(names)) throw std::logic_error("flowdsl: a launch kind the module does not know");
  if (names[k] == nullptr) names[k] = interned(to_string(kind));
  return names[k];
}

// The report every hit returns, made at the first hit and released when the interpreter exits
// (an atexit hook, registered with the module).
PyObject* shared_hit_report = nullptr;

// report["kind"], ["nodes_updated"], ["reason"]: a report reads as the dict it was before.
nb::object report_item(const LaunchReport& r, const std::string& key) {
  if (key == "kind") return nb::borrow(kind_name(r.kind));
  if (key == "nodes_updated") return nb::int_(r.nodes_updated);
  if (key == "reason" && !r.reason.empty()) return nb::str(r.reason.data(), r.reason.size());
  throw nb::key_error(key.c_str());
}

nb::dict report_dict(const LaunchReport& r) {
  nb::dict d;
  d["kind"] = kind_name(r.kind);
  d["nodes_updated"] = r.nodes_updated;
  if (!r.reason.empty()) d["reason"] = r.reason;
  return d;
}

}  // namespace

cudaStream_t stream_of(nb::handle stream) {
  if (stream.is_none()) return nullptr;
  if (nb::isinstance<nb::int_>(stream)) return stream_handle(stream);
  if (const std::optional<cudaStream_t> torch = torch_stream(stream)) return *torch;
  // Anything with __cuda_stream__ (the CUDA Python protocol): (version, handle); torch.cuda.Stream:
  // cuda_stream; cupy.cuda.Stream: ptr.
  static PyObject* const protocol = interned("__cuda_stream__");
  static PyObject* const cuda_stream = interned("cuda_stream");
  static PyObject* const ptr = interned("ptr");
  if (nb::object method = optional_attribute(stream, protocol)) {
    nb::object t = method();
    if (!nb::isinstance<nb::tuple>(t) || nb::len(t) != 2) usage("stream: __cuda_stream__() did not return (version, handle)");
    return stream_handle(nb::borrow<nb::tuple>(t)[1]);
  }
  if (nb::object handle = optional_attribute(stream, cuda_stream)) return stream_handle(handle);
  if (nb::object handle = optional_attribute(stream, ptr)) return stream_handle(handle);
  throw nb::type_error("stream: expected None, an int handle, a torch.cuda.Stream, a cupy.cuda.Stream or an object with "
                       "__cuda_stream__");
}

// A launch's report as a Python LaunchReport. Reports are immutable, so every hit (the common
// case: nothing changed, nothing to say) shares one object and allocates nothing.
Report launch_report(LaunchReport&& r) {
  if (r.kind == LaunchKind::hit && r.nodes_updated == 0 && r.reason.empty()) {
    if (shared_hit_report == nullptr) shared_hit_report = nb::cast(LaunchReport{}).release().ptr();
    return nb::borrow<Report>(shared_hit_report);
  }
  return nb::steal<Report>(nb::cast(std::move(r)).release());
}

// Waits for the device to finish everything (a bench's drain before each timed call).
void drain_device() {
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) throw CudaError(e, "cudaDeviceSynchronize");
}

void bind_runtime(nb::module_& m) {
  nb::class_<LaunchReport>(m, "LaunchReport",
                           "What a launch did: kind ('hit', 'updated', 'instantiated', 'reinstantiated' or 'debug'),\n"
                           "nodes_updated, and reason (why an update was refused, else None). Immutable; also read as\n"
                           "report['kind'] and compared equal to the dict as_dict() gives.")
      .def_prop_ro("kind", [](const LaunchReport& r) { return nb::borrow<nb::str>(kind_name(r.kind)); })
      .def_ro("nodes_updated", &LaunchReport::nodes_updated)
      .def_prop_ro("reason",
                   [](const LaunchReport& r) -> std::optional<std::string> {
                     if (r.reason.empty()) return std::nullopt;
                     return r.reason;
                   })
      .def("as_dict", &report_dict, "{'kind': ..., 'nodes_updated': ...} and 'reason' when there is one.")
      .def("__getitem__", &report_item, "key"_a)
      .def("__eq__",
           [](const LaunchReport& r, nb::handle other) {
             if (nb::isinstance<LaunchReport>(other)) {
               const LaunchReport& o = nb::cast<const LaunchReport&>(other);
               return r.kind == o.kind && r.nodes_updated == o.nodes_updated && r.reason == o.reason;
             }
             return nb::isinstance<nb::dict>(other) && report_dict(r).equal(other);
           })
      .def("__repr__", [](const LaunchReport& r) {
        std::string out = std::string("LaunchReport(kind='") + to_string(r.kind) +
                          "', nodes_updated=" + std::to_string(r.nodes_updated);
        if (!r.reason.empty()) out += ", reason=" + nb::cast<std::string>(nb::repr(nb::str(r.reason.data(), r.reason.size())));
        return out + ")";
      });

  nb::module_::import_("atexit").attr("register")(nb::cpp_function([] {
    Py_CLEAR(shared_hit_report);
    // NVRTC's start-up thread (Graph.fuse(True)) ends while the interpreter and the libraries it
    // loaded are whole, not in the process's exit handlers after them.
    nb::gil_scoped_release release;
    flowdsl::wait_for_fused_kernel_compiler();
  }));

  nb::class_<Runtime>(m, "Runtime",
                      "Keeps executables by topology; launches graphs, updating them in place. Bound to the CUDA device\n"
                      "current when it is made (torch.cuda.current_device()); launch with that device current.")
      .def(
          "__init__",
          [](Runtime* self, std::size_t capacity, bool debug, std::size_t executables_per_topology) {
            RuntimeOptions options;
            options.capacity = capacity;
            options.debug = debug;
            options.executables_per_topology = executables_per_topology;
            new (self) Runtime(options);
          },
          "capacity"_a = RuntimeOptions{}.capacity, "debug"_a = false,
          "executables_per_topology"_a = RuntimeOptions{}.executables_per_topology,
          "capacity: executables kept (least recently launched evicted first); debug: run node by node and\n"
          "raise DebugError naming a node that fails, faults or writes a NaN (also FLOWDSL_DEBUG=1);\n"
          "executables_per_topology: executables of one topology, for launches on several streams at once.")
      .def(
          "launch",
          [](Runtime& self, const PyGraph& g, nb::handle stream) { return launch_on(self, g, stream); },
          "graph"_a, "stream"_a = nb::none(),
          "Launches the graph on `stream` (None: the legacy default stream; an int handle, a torch or CuPy\n"
          "stream) with the GIL released. Returns a LaunchReport (kind, nodes_updated, reason).")
      .def(
          "prepare",
          [](Runtime& self, const PyGraph& g, nb::handle stream) {
            return enqueue_for(g, stream, [&](cudaStream_t s) { return self.prepare(g.graph, s); });
          },
          "graph"_a, "stream"_a = nb::none(),
          "Instantiates and uploads the graph's executable on `stream` when none of its topology is cached,\n"
          "launching nothing: its first launch is then a hit. Returns a LaunchReport ('instantiated' or 'hit').")
      .def(
          "explain",
          [](const Runtime& self, const PyGraph& g, nb::handle stream) { return self.explain(g.graph, stream_of(stream)).text(); },
          "graph"_a, "stream"_a = nb::none(), "What the next launch would do and why, as text.")
      .def_prop_ro("stats", [](const Runtime& self) {
            const RuntimeStatistics s = self.statistics();
            nb::dict d;
            d["launches"] = s.launches;
            d["hits"] = s.hits;
            d["misses"] = s.misses;
            d["node_updates"] = s.node_updates;
            d["reinstantiations"] = s.reinstantiations;
            d["evictions"] = s.evictions;
            d["value_diffs"] = s.value_diffs;
            d["busy_misses"] = s.busy_misses;
            d["busy_launches"] = s.busy_launches;
            d["prepared"] = s.prepared;
            d["private_executables"] = s.private_executables;
            d["executable_bytes"] = s.executable_bytes;
            return d;
          }, "Counters: launches, hits, misses, node updates, re-instantiations, evictions, ...");
}

}  // namespace flowdsl::python
