// SPDX-License-Identifier: Apache-2.0
// What the binding files of flowdsl's Python module share: the Python-side graph, node and body
// (a Graph and the objects its nodes keep alive), the registry, usage errors, streams and
// launches (internal to the extension).
#pragma once

#include <nanobind/nanobind.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "flowdsl/flowdsl.hpp"
#include "flowdsl/profiler.hpp"

namespace flowdsl::python {

namespace nb = nanobind;

// A Python object whose memory a node uses: kept alive while it does, its size checked
// against the kernel's extents.
struct Held {
  nb::object object;
  std::size_t bytes = 0;  // 0: unknown (an address)
};

// The objects a graph's nodes hold, by node id and parameter index: a node's few in one short
// array, found from its id without a search (a set() after a launch of thousands of kernels
// finds them in a cache line or two).
class HeldObjects {
 public:
  const Held* find(NodeId id, std::uint32_t index) const {
    if (id >= by_node_.size()) return nullptr;
    for (const Slot& s : by_node_[id]) {
      if (s.index == index) return &s.held;
    }
    return nullptr;
  }
  void set(NodeId id, std::uint32_t index, Held held) {
    if (id >= by_node_.size()) by_node_.resize(std::size_t{id} + 1);
    std::vector<Slot>& slots = by_node_[id];
    for (Slot& s : slots) {
      if (s.index == index) {
        s.held = std::move(held);  // the object held before is released here
        return;
      }
    }
    slots.push_back(Slot{index, std::move(held)});
  }
  void erase(NodeId id, std::uint32_t index) {
    if (id >= by_node_.size()) return;
    std::vector<Slot>& slots = by_node_[id];
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].index == index) {
        slots.erase(slots.begin() + static_cast<std::ptrdiff_t>(i));
        return;
      }
    }
  }
  template <class Visit>
  int visit_objects(const Visit& visit) const {
    for (const std::vector<Slot>& slots : by_node_) {
      for (const Slot& s : slots) {
        if (const int r = visit(s.held.object.ptr()); r != 0) return r;
      }
    }
    return 0;
  }
  void clear() { std::vector<std::vector<Slot>>().swap(by_node_); }

 private:
  struct Slot {
    std::uint32_t index;
    Held held;
  };
  std::vector<std::vector<Slot>> by_node_;
};

// A Graph and the Python objects whose memory its nodes use.
struct PyGraph {
  Graph graph;
  HeldObjects held;
  std::map<std::string, nb::object> buffers;            // named buffers' objects
};

// A node: its graph and the registry entry it launches, if any.
struct PyNode {
  std::shared_ptr<PyGraph> owner;
  NodeId id;
  const KernelInfo* entry = nullptr;  // registered kernel or library call
  bool conditional = false;

  NodeHandle handle() const { return NodeHandle(&owner->graph.state(), id); }
  std::string name() const { return handle().name(); }
};

// A body of a child or conditional node.
struct PyBody {
  std::shared_ptr<PyGraph> owner;
  NodeId parent;
  std::uint32_t index;
  Body body() const { return Body(&owner->graph.state(), parent, index); }
};

/// The registry the module names kernels in: the global one, with the built-in kernels.
const KernelRegistry& registry();

inline std::string q(const std::string& s) { return quoted_name(s); }

[[noreturn]] inline void usage(const std::string& message) { throw UsageError("flowdsl: " + message); }

/// The CUDA stream a Python object stands for (None: the legacy default stream).
cudaStream_t stream_of(nb::handle stream);

/// A launch's report as a Python LaunchReport (every hit shares one).
using Report = nb::typed<nb::object, LaunchReport>;
Report launch_report(LaunchReport&& r);

/// Calls `enqueue(stream)` (a launch, or making an executable ready) for `g` on the Python stream
/// object with the GIL released while CUDA works; validation errors are raised before, with the
/// GIL held.
template <class Enqueue>
Report enqueue_for(const PyGraph& g, nb::handle stream, Enqueue&& enqueue) {
  const cudaStream_t s = stream_of(stream);
  (void)g.graph.plan();
  LaunchReport r;
  {
    nb::gil_scoped_release release;
    r = enqueue(s);
  }
  return launch_report(std::move(r));
}

/// Launches `g` through `launcher` (a Runtime or a Profiler) on the Python stream object, as
/// enqueue_for does.
template <class Launcher>
Report launch_on(Launcher& launcher, const PyGraph& g, nb::handle stream) {
  return enqueue_for(g, stream, [&](cudaStream_t s) { return launcher.launch(g.graph, s); });
}

/// Waits for the device to finish everything (a bench's drain before each timed call).
void drain_device();

// The module's parts, by topic, each adding its classes and functions to `m`.
void bind_errors(nb::module_& m);    // errors.cpp: the exception types and their translation
void bind_graph(nb::module_& m);     // graph.cpp: Graph, Node, Body, graph files, the registry
void bind_runtime(nb::module_& m);   // runtime.cpp: Runtime, LaunchReport, streams
void bind_family(nb::module_& m);    // family.cpp: Family, the graphs of a step's batch buckets
void bind_profiler(nb::module_& m);  // profiler.cpp: Profiler
void bind_bench(nb::module_& m);     // bench.cpp: flowdsl._flowdsl._bench, the launch bench's timing loops (in-tree builds)

}  // namespace flowdsl::python
