// SPDX-License-Identifier: Apache-2.0
// Kernel nodes, lowering side: launch-shape and argument checks, hash of function and shape,
// device limits, native node, in-place update, eager launch.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "flowdsl/registry.hpp"
#include "driver_calls.hpp"
#include "extent_checks.hpp"
#include "flowdsl/kind_traits.hpp"
#include "fusion.hpp"
#include "lowering_facets.hpp"

namespace flowdsl::lowering {
namespace {

constexpr std::uint32_t max_block_threads = 1024;
constexpr std::uint32_t max_block[3] = {1024, 1024, 64};
constexpr std::size_t default_shared_limit = 48 * 1024;  // above this a kernel must opt in

// Points `pointers` at the node's arguments (resolved into `resolved` when some hold symbols)
// and, for a kernel with derived parameters, at them, computed into this thread's buffer.
void argument_pointers(const KernelOp& op, const Symbols& symbols, std::optional<ArgumentPack>& resolved,
                       std::vector<void*>& pointers) {
  if (op.args.has_symbols()) {
    resolved.emplace(symbols.resolve(op.args));
    resolved->pointers(pointers);
  } else {
    op.args.pointers(pointers);
  }
  if (!op.derived) return;
  alignas(DerivedParameters::max_align) thread_local unsigned char derived[DerivedParameters::max_bytes];
  op.derived.compute(pointers.data(), derived);
  pointers.push_back(derived);
}

// `resolved` holds the arguments when some hold symbols (they are resolved into it).
cudaKernelNodeParams native_params(const KernelOp& op, const Symbols& symbols, std::optional<ArgumentPack>& resolved,
                                   std::vector<void*>& pointers) {
  argument_pointers(op, symbols, resolved, pointers);
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(op.function);
  p.gridDim = dim3(op.launch.grid.x, op.launch.grid.y, op.launch.grid.z);
  p.blockDim = dim3(op.launch.block.x, op.launch.block.y, op.launch.block.z);
  p.sharedMemBytes = op.launch.shared_bytes;
  p.kernelParams = pointers.empty() ? nullptr : pointers.data();
  p.extra = nullptr;
  return p;
}

// The same parameters for the driver's calls, with the function's driver handle.
CUDA_KERNEL_NODE_PARAMS driver_params(const cudaKernelNodeParams& p, cudaFunction_t function) {
  CUDA_KERNEL_NODE_PARAMS d{};
  d.func = function;
  d.gridDimX = p.gridDim.x;
  d.gridDimY = p.gridDim.y;
  d.gridDimZ = p.gridDim.z;
  d.blockDimX = p.blockDim.x;
  d.blockDimY = p.blockDim.y;
  d.blockDimZ = p.blockDim.z;
  d.sharedMemBytes = p.sharedMemBytes;
  d.kernelParams = p.kernelParams;
  return d;
}

// The driver handle check_device learnt for the node's function, where its context is the one
// current on the emitting thread (driver_calls.hpp); null: the runtime's call.
cudaFunction_t driver_handle(const KernelOp& op, const NativeNode& node) {
  if (node.device == nullptr || node.context == nullptr) return nullptr;
  const DeviceContext::KernelAttributes* known = node.device->find(op.function);
  return known != nullptr && known->context == node.context ? known->handle : nullptr;
}

// Dynamic shared memory over 48 KiB needs the kernel's consent.
void opt_in_shared_memory(const KernelOp& op, const std::string& path) {
  if (op.launch.shared_bytes > default_shared_limit) {
    check(cudaFuncSetAttribute(op.function, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(op.launch.shared_bytes)),
          "cudaFuncSetAttribute", path.c_str());
  }
}

// Clusters of at most max_cluster_blocks blocks that tile the grid.
bool valid_cluster(const LaunchShape& l) {
  const Dim3& c = l.cluster;
  return c.volume() != 0 && c.volume() <= max_cluster_blocks && l.grid.x % c.x == 0 && l.grid.y % c.y == 0 &&
         l.grid.z % c.z == 0;
}

// Whether check_structure has nothing to report, as most nodes: tested on its own, this needs
// none of the frame that building the messages does.
bool valid_structure(const KernelOp& op) {
  const Dim3& b = op.launch.block;
  if (op.function == nullptr || !op.grid_set || !op.block_set || op.launch.grid.volume() == 0 || b.volume() == 0 ||
      b.volume() > max_block_threads || b.x > max_block[0] || b.y > max_block[1] || b.z > max_block[2]) {
    return false;
  }
  if (op.launch.cluster.volume() != 1 && !valid_cluster(op.launch)) return false;
  for (std::size_t i = 0; i < op.args.size(); ++i) {
    if (!op.args.bound(i)) return false;
  }
  return !op.derived || valid_derived(op.derived);
}

// Whether check_symbols has something to look at: a Condition argument, or a pointer argument
// holding a symbol. Most kernels have neither; the scan is the common case's whole cost.
bool holds_conditions_or_symbols(const ArgumentPack& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args.kind(i) == SlotKind::value || !args.bound(i)) continue;
    if (args.kind(i) == SlotKind::condition) return true;
    std::uint64_t word = 0;
    std::memcpy(&word, args.data(i), sizeof word);  // a pointer slot's 8 bytes (ArgumentPack::word)
    if (symbol::is_symbol(word)) return true;
  }
  return false;
}

}  // namespace

// The checks below test the common case (nothing to report) first and leave the messages to
// functions of their own, which these call only when there is something to say: building a
// message needs a stack frame that the tests alone do not, and every node pays for the tests.

void report_structure(const KernelOp& op, NodeCheck& diag) {
  if (op.function == nullptr) diag.report("kernel function is null");
  if (!op.grid_set && !op.block_set) {
    diag.report("launch shape was never set (call grid() and block(), or launch())");
  } else if (!op.grid_set) {
    diag.report("grid was never set (call grid() or launch())");
  } else if (!op.block_set) {
    diag.report("block was never set (call block() or launch())");
  }
  const Dim3& g = op.launch.grid;
  const Dim3& b = op.launch.block;
  if (g.volume() == 0) diag.report("grid " + to_string(g) + " has a zero dimension");
  if (b.volume() == 0) diag.report("block " + to_string(b) + " has a zero dimension");
  if (b.volume() > max_block_threads) {
    diag.report("block of " + std::to_string(b.volume()) + " threads (" + to_string(b) + ") exceeds " +
                          std::to_string(max_block_threads));
  } else if (b.x > max_block[0] || b.y > max_block[1] || b.z > max_block[2]) {
    diag.report("block " + to_string(b) + " exceeds the per-axis limits 1024x1024x64");
  }
  const Dim3& c = op.launch.cluster;
  if (c.volume() == 0) {
    diag.report("cluster " + to_string(c) + " has a zero dimension");
  } else if (c.volume() > max_cluster_blocks) {
    diag.report("cluster " + to_string(c) + " holds " + std::to_string(c.volume()) + " blocks, over the " +
                std::to_string(max_cluster_blocks) + " a cluster may hold");
  } else if (g.volume() != 0 && !valid_cluster(op.launch)) {
    diag.report("grid " + to_string(g) + " is not a multiple of its cluster " + to_string(c));
  }
  for (std::size_t i = 0; i < op.args.size(); ++i) {
    if (!op.args.bound(i)) diag.report("argument " + std::to_string(i) + " was never set (call args(...))");
  }
  if (op.derived && !valid_derived(op.derived)) {
    diag.report("derived parameters of " + std::to_string(op.derived.bytes) + " bytes aligned to " +
                std::to_string(op.derived.align) + " (1 to " + std::to_string(DerivedParameters::max_bytes) +
                " bytes, a power-of-two alignment up to " + std::to_string(DerivedParameters::max_align) + ")");
  }
}

void check_structure(const KernelOp& op, NodeCheck& diag) {
  if (!valid_structure(op)) report_structure(op, diag);
}

// Condition arguments name a conditional node whose body holds this kernel or the body holding
// it; pointer arguments hold no condition, and symbolic ones stay inside their alloc's memory.
void check_symbols(const KernelOp& op, NodeCheck& diag) {
  const Description& d = diag.description();
  for (std::size_t i = 0; i < op.args.size(); ++i) {
    if (op.args.kind(i) == SlotKind::value || !op.args.bound(i)) continue;
    const std::uint64_t word = op.args.word(i);
    const bool is_symbol = symbol::is_symbol(word);
    if (!is_symbol && op.args.kind(i) == SlotKind::pointer) continue;  // the common case: nothing to say
    const KernelInfo* info = op.info;
    const bool named = info != nullptr && i < info->params.size();
    const std::string param = named ? quoted_name(info->params[i].name) : std::to_string(i);
    const std::string member = named ? "args/" + info->params[i].name : "";
    const std::uint32_t index = is_symbol ? symbol::index_of(word) : 0;
    const NodeId owner = is_symbol && index < d.symbols.size() ? d.symbols[index] : no_node;
    if (op.args.kind(i) == SlotKind::pointer) {
      check_pointer(diag, word, "argument " + param, member);
      continue;
    }
    if (owner == no_node || !is_conditional(d.nodes[owner].op) || symbol::offset_of(word) != 0) {
      diag.report("argument " + param + " takes a Condition, but is not the condition() of a conditional node of this graph",
                  member);
      continue;
    }
    const Node& target = d.nodes[owner];
    bool below = target.parent == no_node;  // a top-level node's condition may be set anywhere
    for (NodeId at = diag.node().parent; at != no_node && !below; at = d.nodes[at].parent) {
      below = d.nodes[at].parent == target.parent && d.nodes[at].body == target.body;
    }
    below = below || (diag.node().parent == target.parent && diag.node().body == target.body);
    if (!below) {
      diag.report("argument " + param + " sets the condition of node " + quoted_name(node_path(d, owner)) +
                      ", which must sit in this kernel's body or a body holding it (CUDA's rule)",
                  member);
    }
  }
}

void check_parameters(const KernelOp& op, NodeCheck& diag) {
  if (holds_conditions_or_symbols(op.args)) check_symbols(op, diag);
  // Before every update of this node: a node declared from a registered entry is checked by
  // value; one of a typed kernel is looked up in the registry only when there are named buffers
  // to check its pointers against.
  if (op.info == nullptr && diag.buffers().empty()) return;
  if (const KernelInfo* info = registered_entry(op.info, op.function, op.args, diag.kernels())) {
    check_arguments(op.args, op.launch, *info, diag);
  }
}

void derived_accesses(const KernelOp& op, KernelInfos& kernels, std::vector<Access>& out) {
  if (const KernelInfo* info = registered_entry(op.info, op.function, op.args, kernels)) {
    extent_accesses(op.args, op.launch, *info, out);
  }
}

// Two 32-bit fields a word (argument counts fit in 16 bits): every field, in fewer steps.
void hash_structure(const KernelOp& op, StructureWords& h) {
  const LaunchShape& l = op.launch;
  h.add(reinterpret_cast<std::uintptr_t>(op.function));
  h.add(l.grid.x | (std::uint64_t{l.grid.y} << 32));
  h.add(l.grid.z | (std::uint64_t{l.block.x} << 32));
  h.add(l.block.y | (std::uint64_t{l.block.z} << 32));
  h.add(l.shared_bytes | (std::uint64_t{op.args.size()} << 32));
  h.add(reinterpret_cast<std::uintptr_t>(op.derived.compute));
  if (l.cluster.volume() != 1) {  // no words without clusters: hashes of graphs without stay as they were
    h.add(l.cluster.x | (std::uint64_t{l.cluster.y} << 32));
    h.add(l.cluster.z);
  }
}

void describe_structure(const KernelOp& op, std::vector<StructureField>& out) {
  std::string name = kernel_name_of(op);
  if (name.empty()) {
    char address[32];
    std::snprintf(address, sizeof address, "%p", op.function);
    name = address;
  }
  out.push_back({"function", std::move(name)});
  out.push_back({"grid", to_string(op.launch.grid)});
  out.push_back({"block", to_string(op.launch.block)});
  out.push_back({"shared memory", std::to_string(op.launch.shared_bytes)});
  if (op.launch.cluster.volume() != 1) out.push_back({"cluster", to_string(op.launch.cluster)});
  out.push_back({"argument count", std::to_string(op.args.size())});
  if (op.derived) out.push_back({"derived parameters", std::to_string(op.derived.bytes) + " bytes"});
}

void check_device(const KernelOp& op, NodeCheck& diag, DeviceContext& device) {
  if (op.function == nullptr) return;  // reported by validation
  const DeviceLimits& limits = device.limits;
  const auto [known, added] = device.entry(op.function);
  if (added) {
    known->status = cudaFuncGetAttributes(&known->attributes, op.function);
    if (known->status != cudaSuccess) (void)cudaGetLastError();
    if (known->status == cudaSuccess && driver_calls().available()) {
      if (cudaGetFuncBySymbol(&known->handle, op.function) == cudaSuccess) {
        known->context = current_context();
      } else {
        (void)cudaGetLastError();  // the runtime's calls will do
        known->handle = nullptr;
      }
    }
  }
  if (known->status != cudaSuccess) {
    diag.report(std::string("the function is not a kernel loadable on device ") + std::to_string(limits.device) +
                          " (" + cudaGetErrorName(known->status) + ")");
    return;
  }
  const cudaFuncAttributes& attr = known->attributes;
  const std::size_t shared = std::size_t{op.launch.shared_bytes} + attr.sharedSizeBytes;
  if (shared > limits.shared_optin) {
    diag.report("dynamic shared memory of " + std::to_string(op.launch.shared_bytes) + " bytes (+" +
                          std::to_string(attr.sharedSizeBytes) + " static) exceeds the device's limit of " +
                          std::to_string(limits.shared_optin) + " bytes per block");
  }
  if (op.launch.block.volume() > static_cast<std::uint64_t>(attr.maxThreadsPerBlock)) {
    diag.report("block of " + std::to_string(op.launch.block.volume()) + " threads exceeds this kernel's limit of " +
                          std::to_string(attr.maxThreadsPerBlock) + " (registers or launch bounds)");
  }
  const std::uint32_t grid[3] = {op.launch.grid.x, op.launch.grid.y, op.launch.grid.z};
  for (int axis = 0; axis < 3; ++axis) {
    if (grid[axis] > limits.max_grid[axis]) {
      diag.report("grid " + to_string(op.launch.grid) + " exceeds the device's limit of " +
                            std::to_string(limits.max_grid[axis]) + " blocks on axis " + "xyz"[axis]);
    }
  }
}

cudaGraphNode_t add_native(const KernelOp& op, NativeNode& node) {
  opt_in_shared_memory(op, node.path);
  thread_local std::vector<void*> pointers;
  std::optional<ArgumentPack> resolved;  // made only when some argument holds a symbol
  const cudaKernelNodeParams params = native_params(op, node.symbols, resolved, pointers);
  cudaGraphNode_t native = nullptr;
  node.function = driver_handle(op, node);
  if (node.function != nullptr) {
    const CUDA_KERNEL_NODE_PARAMS driver = driver_params(params, node.function);
    check(as_runtime_status(driver_calls().add_kernel_node(reinterpret_cast<CUgraphNode*>(&native), node.graph,
                                                           node.deps.data(), node.deps.size(), &driver)),
          "cuGraphAddKernelNode", node.path.c_str());
  } else {
    check(cudaGraphAddKernelNode(&native, node.graph, node.deps.data(), node.deps.size(), &params),
          "cudaGraphAddKernelNode", node.path.c_str());
  }
  if (op.launch.cluster.volume() != 1) {  // an attribute of the node, kept by updates of its parameters
    cudaKernelNodeAttrValue value{};
    value.clusterDim.x = op.launch.cluster.x;
    value.clusterDim.y = op.launch.cluster.y;
    value.clusterDim.z = op.launch.cluster.z;
    check(cudaGraphKernelNodeSetAttribute(native, cudaLaunchAttributeClusterDimension, &value),
          "cudaGraphKernelNodeSetAttribute (cluster dimension)", node.path.c_str());
  }
  return native;
}

UpdateStatus update_native(const KernelOp& op, const NativeUpdate& node) {
  thread_local std::vector<void*> pointers;
  std::optional<ArgumentPack> resolved;  // made only when some argument holds a symbol
  const cudaKernelNodeParams params = native_params(op, node.symbols, resolved, pointers);
  if (node.function != nullptr) {
    const CUDA_KERNEL_NODE_PARAMS driver = driver_params(params, node.function);
    return {as_runtime_status(driver_calls().exec_kernel_node_set_params(node.exec, node.native, &driver)),
            "cuGraphExecKernelNodeSetParams"};
  }
  return {cudaGraphExecKernelNodeSetParams(node.exec, node.native, &params), "cudaGraphExecKernelNodeSetParams"};
}

void launch_eager(const KernelOp& op, EagerNode& node) {
  opt_in_shared_memory(op, node.path);
  thread_local std::vector<void*> pointers;
  std::optional<ArgumentPack> resolved;  // made only when some argument holds a symbol
  argument_pointers(op, node.symbols, resolved, pointers);
  const dim3 grid(op.launch.grid.x, op.launch.grid.y, op.launch.grid.z);
  const dim3 block(op.launch.block.x, op.launch.block.y, op.launch.block.z);
  void** args = pointers.empty() ? nullptr : pointers.data();
  if (op.launch.cluster.volume() == 1) {
    check(cudaLaunchKernel(op.function, grid, block, args, op.launch.shared_bytes, node.stream), "cudaLaunchKernel",
          node.path.c_str());
    return;
  }
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = op.launch.cluster.x;
  cluster.val.clusterDim.y = op.launch.cluster.y;
  cluster.val.clusterDim.z = op.launch.cluster.z;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = op.launch.shared_bytes;
  config.stream = node.stream;
  config.attrs = &cluster;
  config.numAttrs = 1;
  check(cudaLaunchKernelExC(&config, op.function, args), "cudaLaunchKernelExC", node.path.c_str());
}

void save_parameters(const KernelOp& op, std::vector<unsigned char>& out) { save_arguments(op.args, out); }

bool same_parameters(const KernelOp& wanted, SavedParameters& held, const SymbolMatch& symbols) {
  return same_arguments(wanted.args, held, symbols);
}

FLOWDSL_LOWERING(KernelOp)

Operation fused_operation(const Description& d, const FusedGroup& group, const void* kernel) {
  KernelOp op;
  op.function = kernel;
  op.kernel_name = "fused";
  op.launch = group.launch;
  op.grid_set = true;
  op.block_set = true;
  op.waits_for_producers = true;
  for (const FusedArgument& a : group.arguments) {
    const LaunchFields& member = *launch_fields(d.nodes[group.members[a.member]].op);  // members are kernels
    const std::size_t size = member.args.slot_size(a.param);
    op.args.append(member.args.data(a.param), size, size, true, member.args.kind(a.param));
  }
  return op;
}

}  // namespace flowdsl::lowering
