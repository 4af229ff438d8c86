// SPDX-License-Identifier: Apache-2.0
// flowdsl._flowdsl._bench: timing loops for bench/python_launch.py, the calls the bench times from
// Python made from C++ in the same process (not a stable API).
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "bindings.hpp"

using namespace nanobind::literals;

namespace flowdsl::python {

void bind_bench(nb::module_& m) {
  // Timing loops for bench/python_launch.py: the calls the bench times from Python, made from
  // C++ in the same process, so that both sides are timed in the same state of the host. Each
  // call: the device drained, then the host clock around the call alone (microseconds).
  nb::module_ bench = m.def_submodule("_bench", "Timing loops for bench/python_launch.py (not a stable API).");
  bench.def(
      "launch",
      [](Runtime& runtime, const PyGraph& g, nb::handle stream, int calls) {
        const cudaStream_t s = stream_of(stream);
        std::vector<double> us(static_cast<std::size_t>(std::max(calls, 0)));
        nb::gil_scoped_release release;
        for (double& t : us) {
          drain_device();
          const auto t0 = std::chrono::steady_clock::now();
          (void)runtime.launch(g.graph, s);
          t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        }
        drain_device();
        return us;
      },
      "runtime"_a, "graph"_a, "stream"_a, "calls"_a, "Runtime::launch of the graph, timed call by call.");
  bench.def(
      "swap",
      [](Runtime& runtime, const PyNode& node, const std::string& param, std::uintptr_t a, std::uintptr_t b,
         nb::handle stream, int calls) {
        if (node.entry == nullptr || node.entry->is_call()) usage("_bench.swap: a kernel node of a registered kernel");
        const KernelInfo& entry = *node.entry;
        const std::size_t index = entry.index_of(param);
        if (index == entry.params.size() || !entry.params[index].type.pointer) {
          usage("_bench.swap: " + q(param) + " is not a pointer parameter of " + q(entry.name));
        }
        PyGraph& g = *node.owner;
        const auto& op = std::get<KernelOp>(g.graph.description().nodes[node.id].op);
        void* before = nullptr;
        std::memcpy(&before, op.args.data(index), sizeof before);
        const cudaStream_t s = stream_of(stream);
        RegisteredKernelNode k(&g.graph.state(), node.id, &entry);
        std::vector<double> us(static_cast<std::size_t>(std::max(calls, 0)));
        try {
          nb::gil_scoped_release release;
          for (std::size_t i = 0; i < us.size(); ++i) {
            const auto address = reinterpret_cast<void*>(i % 2 == 0 ? a : b);
            drain_device();
            const auto t0 = std::chrono::steady_clock::now();
            k.set_bytes(param, &address, sizeof address);
            (void)runtime.launch(g.graph, s);
            us[i] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
          }
          drain_device();
        } catch (...) {
          k.set_bytes(param, &before, sizeof before);
          throw;
        }
        k.set_bytes(param, &before, sizeof before);  // the tensor the node holds again
        return us;
      },
      "runtime"_a, "node"_a, "param"_a, "a"_a, "b"_a, "stream"_a, "calls"_a,
      "The node's pointer parameter set to a, then b, alternately (RegisteredKernelNode::set_bytes), each\n"
      "change followed by Runtime::launch; timed call by call. The node's own value is restored after.");
}

}  // namespace flowdsl::python
