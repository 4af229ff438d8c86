// SPDX-License-Identifier: Apache-2.0
// Debug launches: each node on its own, then a stream synchronisation and a NaN scan of the
// floating-point buffers it declares it writes, so that a fault names its node.
#include "debug_launch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <variant>
#include <vector>

#include "flowdsl/eager.hpp"
#include "flowdsl/hazards.hpp"
#include "flowdsl/plan.hpp"
#include "flowdsl/runtime.hpp"
#include "log_internal.hpp"
#include "value_text.hpp"

namespace flowdsl::detail {
namespace {

constexpr std::size_t scan_chunk_bytes = std::size_t{16} << 20;  // host staging per NaN scan step

std::string hex(const void* ptr) { return detail::hex(reinterpret_cast<std::uintptr_t>(ptr)); }

const void* pointer_argument(const LaunchFields& op, std::size_t index) {
  const void* value = nullptr;
  if (op.args.slot_size(index) == sizeof value) std::memcpy(&value, op.args.data(index), sizeof value);
  return value;
}

std::string argument_text(const LaunchFields& op, std::size_t index, const KernelInfo* info) {
  if (info == nullptr || info->params[index].type.pointer) {
    if (op.args.slot_size(index) == sizeof(void*)) return hex(pointer_argument(op, index));
    return detail::hex_bytes(op.args.data(index), op.args.slot_size(index));
  }
  const std::string_view name = info->params[index].enumerator_at(op.args.data(index));  // an enumerated value by name
  if (!name.empty()) return std::string(name);
  return detail::scalar_text(info->params[index].type.scalar, op.args.data(index));
}

// "kernel 'saxpy', grid 4x1x1, block 256x1x1, 0 bytes shared, arguments (n=1024, x=0x7f..)".
std::string kernel_text(const LaunchFields& op, const std::string& name, const KernelInfo* info) {
  std::string text = "kernel " + quoted_name(name) + ", grid " + to_string(op.launch.grid) + ", block " +
                     to_string(op.launch.block) + ", " + std::to_string(op.launch.shared_bytes) +
                     " bytes shared, arguments (";
  for (std::size_t i = 0; i < op.args.size(); ++i) {
    if (i > 0) text += ", ";
    text += (info ? info->params[i].name : "#" + std::to_string(i)) + "=" + argument_text(op, i, info);
  }
  return text + ")";
}

template <class T>
bool is_nan(T value) {
  if constexpr (std::is_same_v<T, half>) {
    return (value.bits & 0x7c00u) == 0x7c00u && (value.bits & 0x03ffu) != 0;
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return (value.bits & 0x7f80u) == 0x7f80u && (value.bits & 0x007fu) != 0;
  } else {
    return std::isnan(value);
  }
}

struct NanCount {
  std::uint64_t count = 0;
  std::uint64_t first = 0;
};

// NaNs among the `bytes` bytes at `ptr` (device or host memory) read as `type`.
NanCount count_nans(const void* ptr, std::size_t bytes, ScalarType type, const std::string& path) {
  return visit_scalar(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    NanCount nans;
    if constexpr (std::is_floating_point_v<T> || is_16bit_float<T>) {
      const std::uint64_t elements = bytes / sizeof(T);
      std::vector<T> host(std::min<std::uint64_t>(elements, scan_chunk_bytes / sizeof(T)));
      for (std::uint64_t first = 0; first < elements; first += host.size()) {
        const std::size_t n = std::min<std::uint64_t>(host.size(), elements - first);
        check(cudaMemcpy(host.data(), static_cast<const T*>(ptr) + first, n * sizeof(T), cudaMemcpyDefault),
              "cudaMemcpy (debug NaN scan)", path.c_str());
        for (std::size_t i = 0; i < n; ++i) {
          if (is_nan(host[i]) && nans.count++ == 0) nans.first = first + i;
        }
      }
    }
    return nans;
  });
}

bool is_float(ScalarType type) {
  return type == ScalarType::f16 || type == ScalarType::bf16 || type == ScalarType::f32 || type == ScalarType::f64;
}

class Checker {
 public:
  Checker(const Description& d, cudaStream_t stream, const KernelRegistry& registry)
      : d_(d), stream_(stream), registry_(registry) {}

  // After node `id` ran: its CUDA status, then NaNs in its floating-point outputs.
  void after(NodeId id) {
    const cudaError_t code = cudaStreamSynchronize(stream_);
    if (code != cudaSuccess) fail(id, code, std::string(cudaGetErrorName(code)) + " (" + cudaGetErrorString(code) + ") once it ran");
    if (const LaunchFields* op = launch_fields(d_.nodes[id].op)) scan_outputs(id, *op);
    FLOWDSL_DEBUG("debug launch: node {} done", quoted_name(node_path(d_, id)));
  }

  [[noreturn]] void fail(NodeId id, cudaError_t code, const std::string& what) const {
    const std::string path = node_path(d_, id);
    std::string kernel, about(kind_name(d_.nodes[id].op));
    if (const LaunchFields* op = launch_fields(d_.nodes[id].op)) {
      const KernelInfo* info = op->entry(registry_);
      kernel = !op->kernel_name.empty() ? op->kernel_name : info ? info->name : kernel_name_of(*op);
      about = kernel_text(*op, kernel.empty() ? hex(op->function) : kernel, info);
    }
    throw DebugError("debug launch: node " + quoted_name(path) + " (" + about + "): " + what, path, kernel, code);
  }

 private:
  void scan_outputs(NodeId id, const LaunchFields& op) const {
    const KernelInfo* info = op.entry(registry_);
    if (info == nullptr) return;  // parameter types unknown
    for (const Access& access : accesses_of(d_, id)) {  // declared, and implied by extents
      if (access.mode == AccessMode::read || access.bytes == 0 || access.ptr == nullptr) continue;
      // Graph memory has its address only inside the run (and is gone once freed): not scanned.
      if (symbol::is_symbol(reinterpret_cast<std::uintptr_t>(access.ptr))) continue;
      for (std::size_t i = 0; i < info->params.size(); ++i) {
        const ParamType& type = info->params[i].type;
        if (!type.pointer || !is_float(type.scalar) || pointer_argument(op, i) != access.ptr) continue;
        const NanCount nans = count_nans(access.ptr, access.bytes, type.scalar, node_path(d_, id));
        if (nans.count > 0) {
          fail(id, cudaSuccess,
               "wrote NaN into " + std::to_string(nans.count) + " of " +
                   std::to_string(access.bytes / size_of(type.scalar)) + " " + std::string(to_string(type.scalar)) +
                   " elements of " + quoted_name(info->params[i].name) + " (first at element " +
                   std::to_string(nans.first) + ")");
        }
        break;
      }
    }
  }

  const Description& d_;
  cudaStream_t stream_;
  const KernelRegistry& registry_;
};

NodeId node_at(const Description& d, const std::string& path) {
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    if (node_path(d, id) == path) return id;
  }
  return no_node;
}

}  // namespace

void launch_debug(const Graph& graph, cudaStream_t stream, const KernelRegistry& registry) {
  const Description& d = graph.description();
  const Plan& plan = graph.plan();
  if (auto problems = validate_parameters(d); !problems.empty()) throw ValidationError(std::move(problems));
  // An error left by earlier work must not be blamed on the first node.
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (before a debug launch)");
  FLOWDSL_DEBUG("debug launch of topology {:016x}: {} nodes", plan.topology_hash, plan.position.size());
  Checker checker(d, stream, registry);
  try {
    launch_eagerly(graph, stream, [&](NodeId id) { checker.after(id); });
  } catch (const CudaError& e) {  // the node's own call failed (e.g. cudaLaunchKernel)
    const NodeId id = node_at(d, e.node());
    if (id == no_node) throw;
    checker.fail(id, e.code(), std::string(e.call()) + " failed: " + cudaGetErrorName(e.code()) + " (" +
                                   cudaGetErrorString(e.code()) + ")");
  }
}

}  // namespace flowdsl::detail
