// SPDX-License-Identifier: Apache-2.0
// What the kinds' lowering facets work with: problems named by node, the buffers and kernels a
// check looks up, the device and its kernels' attributes, the native values symbols stand for,
// parameters kept as bytes, and the node being emitted, updated or launched eagerly. The facet
// contract itself is lowering_facets.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <string>
#include <unordered_map>
#include <vector>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "flowdsl/cuda_handles.hpp"
#include "flowdsl/description.hpp"
#include "flowdsl/plan.hpp"
#include "flowdsl/error.hpp"

namespace flowdsl::lowering {

/// Collects diagnostics, formatting each as "node 'path' (kind): message".
class Diagnostics {
 public:
  explicit Diagnostics(std::vector<Diagnostic>& out) : out_(out) {}
  /// `member`: the parameter the problem is about, as a relative JSON pointer ("args/x").
  void report(const Description& d, NodeId id, const std::string& message, std::string member = {});
  /// A complete message about `nodes`; `member`, as report's, belongs to the first of them.
  void add(std::vector<std::string> nodes, std::string message, std::string member = {});
  /// Appends problems collected apart (in their order), after those reported so far.
  void add(std::vector<Diagnostic>&& problems);
  bool empty() const noexcept { return out_.empty(); }

 private:
  std::vector<Diagnostic>& out_;
};

/// The named buffers of a description by address, to find the one a pointer points into; the
/// memory of each alloc node whose address was taken counts as one, named by the node's path, at
/// its symbolic address (symbols of distinct allocs never overlap). Built on first use.
class BufferIndex {
 public:
  explicit BufferIndex(const Description& d) : d_(d) {}
  /// The named buffer holding `address`, or null.
  const NamedBuffer* find(std::uintptr_t address);
  /// Whether the description names no buffer and no alloc's address was taken (then nothing
  /// can be checked against one).
  bool empty() const noexcept { return d_.buffers.empty() && !holds_allocs(); }

 private:
  void build();
  // Asked before every node's parameter check: the answer is kept.
  bool holds_allocs() const noexcept { return holds_allocs_ < 0 ? find_allocs() : holds_allocs_ != 0; }
  bool find_allocs() const noexcept;

  const Description& d_;
  mutable signed char holds_allocs_ = -1;  ///< whether a symbol stands for an alloc; -1: not looked yet
  bool built_ = false;
  std::vector<NamedBuffer> allocs_;         ///< the memory of the allocs whose symbol was made
  std::vector<const NamedBuffer*> sorted_;  ///< by address (named buffers do not overlap)
};

/// Registered kernels by function (KernelRegistry::global().find_function), each looked up once
/// for one pass over a description: a lookup takes the registry's lock, and a graph launches a
/// few functions many times. Consecutive kernel nodes mostly share a function.
class KernelInfos {
 public:
  const KernelInfo* find(const void* function) {
    return looked_ && function == last_function_ ? last_ : look_up(function);
  }

 private:
  const KernelInfo* look_up(const void* function);

  const void* last_function_ = nullptr;
  const KernelInfo* last_ = nullptr;  ///< the registered kernel of last_function_
  bool looked_ = false;               ///< last_function_ was looked up
  std::unordered_map<const void*, const KernelInfo*> found_;
};

/// The node a check is about, and where its problems go.
class NodeCheck {
 public:
  NodeCheck(const Description& d, NodeId id, Diagnostics& diag, BufferIndex& buffers, KernelInfos& kernels)
      : d_(d), id_(id), diag_(diag), buffers_(buffers), kernels_(kernels) {}
  void report(const std::string& message, std::string member = {}) { diag_.report(d_, id_, message, std::move(member)); }
  const Node& node() const { return d_.nodes[id_]; }
  NodeId id() const noexcept { return id_; }
  const Description& description() const noexcept { return d_; }
  std::string path() const { return node_path(d_, id_); }
  BufferIndex& buffers() { return buffers_; }
  KernelInfos& kernels() { return kernels_; }

 private:
  const Description& d_;
  NodeId id_;
  Diagnostics& diag_;
  BufferIndex& buffers_;
  KernelInfos& kernels_;
};

/// Reports a range of `bytes` at `ptr` that starts inside a named buffer and runs past its end
/// ("writes 4096 bytes at offset 1024 of buffer 'x' (2048 bytes)"), at `member`.
void check_range(NodeCheck& check, const void* ptr, std::size_t bytes, const char* verb, const char* member);

/// Inside a conditional node's body, CUDA wants every node on one device: reports an operand
/// (`member`) of device memory on another device than `device`. Symbols and host memory pass.
void check_same_device(NodeCheck& check, const void* ptr, int device, const char* member);

/// Reports a pointer holding a symbol that stands for no memory: one no node of this graph gave,
/// a conditional node's condition, or an address at or past the end of its alloc's memory. `what`
/// names the pointer in the message ("argument 'x'", "source pointer"); `member` as for report.
void check_pointer(NodeCheck& check, std::uint64_t value, const std::string& what, const std::string& member);

/// What emission needs to know about the device.
struct DeviceLimits {
  int device = 0;
  std::size_t shared_optin = 0;  ///< max dynamic + static shared memory per block (opt-in)
  unsigned max_grid[3] = {0, 0, 0};
};

/// The device and what emission has learnt about it: kernel attributes are read once per
/// function for the life of the backend that owns this, not once per node or per emission.
struct DeviceContext {
  DeviceContext() = default;
  // Copies would remember an entry of the other's table.
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  DeviceLimits limits;
  struct KernelAttributes {
    cudaError_t status;
    cudaFuncAttributes attributes;
    /// The driver's handle of the function in this device's context (cudaGetFuncBySymbol),
    /// for the driver calls of emission and updates; null where it could not be had.
    cudaFunction_t handle = nullptr;
    CUcontext context = nullptr;  ///< the context `handle` belongs to
  };
  /// The entry of `function`, and whether it was made just now (empty, for the caller to fill).
  /// The last entry found is remembered: a graph's nodes mostly run few kernels, in runs.
  std::pair<KernelAttributes*, bool> entry(const void* function) {
    if (function == recent_function_ && recent_ != nullptr) return {recent_, false};
    const auto [it, added] = kernels_.try_emplace(function);
    recent_function_ = function;
    recent_ = &it->second;  // elements of an unordered_map never move
    return {recent_, added};
  }
  /// The entry of `function`, or null.
  const KernelAttributes* find(const void* function) const {
    if (function == recent_function_ && recent_ != nullptr) return recent_;
    const auto it = kernels_.find(function);
    if (it == kernels_.end()) return nullptr;
    recent_function_ = function;
    recent_ = const_cast<KernelAttributes*>(&it->second);
    return recent_;
  }

 private:
  std::unordered_map<const void*, KernelAttributes> kernels_;
  mutable const void* recent_function_ = nullptr;
  mutable KernelAttributes* recent_ = nullptr;
};

/// The native values symbols stand for (conditional handles, graph memory addresses) in one
/// native graph or executable: `values` by plan position of the node owning each.
class Symbols {
 public:
  Symbols(const Description& d, const Plan& plan, const std::vector<std::uint64_t>& values)
      : d_(d), plan_(plan), values_(values) {}
  /// `value` itself when it is no symbol; else the native value it stands for, plus its offset.
  /// \throws UsageError when the symbol's node has no native value (yet).
  std::uint64_t resolve(std::uint64_t value) const;
  const void* resolve(const void* ptr) const {
    return reinterpret_cast<const void*>(resolve(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ptr))));
  }
  /// The kernel arguments with every symbol in a pointer or Condition slot resolved.
  ArgumentPack resolve(const ArgumentPack& args) const;

 private:
  const Description& d_;
  const Plan& plan_;
  const std::vector<std::uint64_t>& values_;
};

/// Tells whether two values that may be symbols (pointer and Condition arguments, copy and fill
/// pointers) mean the same in two descriptions of one topology: the parameters an executable
/// holds, and a Graph about to launch on it. Plain values match when equal; a symbol matches the
/// same symbol when its index names, in both descriptions, the node at the same plan position.
/// A symbol of another index counts as different, even where it stands for the same node.
class SymbolMatch {
 public:
  /// By symbol index, the plan position of the node owning it (no_position: none), of the
  /// description the executable holds and of the one wanted.
  SymbolMatch(const std::vector<std::uint32_t>& held, const std::vector<std::uint32_t>& wanted)
      : held_(held), wanted_(wanted) {}
  static constexpr std::uint32_t no_position = ~std::uint32_t{0};

  bool same(std::uint64_t held, std::uint64_t wanted) const {
    if (held != wanted) return false;
    if (!symbol::is_symbol(held)) return true;
    const std::uint32_t index = symbol::index_of(held);
    return index < held_.size() && index < wanted_.size() && held_[index] == wanted_[index] &&
           held_[index] != no_position;
  }
  bool same(const void* held, const void* wanted) const {
    return same(std::uint64_t{reinterpret_cast<std::uintptr_t>(held)},
                std::uint64_t{reinterpret_cast<std::uintptr_t>(wanted)});
  }

 private:
  const std::vector<std::uint32_t>& held_;
  const std::vector<std::uint32_t>& wanted_;
};

/// A node's parameters as bytes (save_parameters writes them with put, same_parameters reads them
/// back with take, field by field in the same order): plain bytes, symbols left as they are.
template <class T>
void put(std::vector<unsigned char>& out, const T& value) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(&value);
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

/// Reads saved parameters back, field by field; `ok()` turns false once more was taken than saved.
class SavedParameters {
 public:
  SavedParameters(const unsigned char* bytes, std::size_t size) : next_(bytes), left_(size) {}
  template <class T>
  T take() {
    T value{};
    take(&value, sizeof(T));
    return value;
  }
  /// Copies the next `size` bytes to `out`.
  void take(void* out, std::size_t size) {
    if (size > left_) {
      ok_ = false;
      left_ = 0;
      return;
    }
    std::memcpy(out, next_, size);
    next_ += size;
    left_ -= size;
  }
  /// Whether the next `size` bytes equal those at `bytes`; takes them.
  bool equal(const void* bytes, std::size_t size) {
    if (size > left_ || std::memcmp(next_, bytes, size) != 0) {
      ok_ = false;
      return false;
    }
    next_ += size;
    left_ -= size;
    return true;
  }
  /// Everything saved was taken, and no more.
  bool done() const noexcept { return ok_ && left_ == 0; }

 private:
  const unsigned char* next_;
  std::size_t left_;
  bool ok_ = true;
};

/// Arguments (kernels', library calls') as saved parameters: every slot's bytes, in order.
inline void save_arguments(const ArgumentPack& args, std::vector<unsigned char>& out) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto* bytes = static_cast<const unsigned char*>(args.data(i));
    out.insert(out.end(), bytes, bytes + args.slot_size(i));
  }
}
/// Whether `args` equal the arguments `held` saved; a pointer or Condition holding a symbol
/// compares by what the symbol names too.
inline bool same_arguments(const ArgumentPack& args, SavedParameters& held, const SymbolMatch& symbols) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool same = args.kind(i) == SlotKind::value ? held.equal(args.data(i), args.slot_size(i))
                                                      : symbols.same(held.take<std::uint64_t>(), args.word(i));
    if (!same) return false;
  }
  return true;
}

/// One node being added to a native graph: where, after what, and how to emit its bodies.
/// A callable's address and a way to call it, for the length of one call that is given it (never
/// kept): what NativeNode hands kinds, lighter than a std::function made for every node emitted.
template <class Signature>
class FunctionRef;
template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  FunctionRef(std::nullptr_t = nullptr) noexcept {}  // NOLINT(google-explicit-constructor): as std::function
  /// `f` must outlive every call through this.
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F& f) noexcept  // NOLINT(google-explicit-constructor)
      : object_(static_cast<void*>(std::addressof(f))),
        call_([](void* object, Args... args) -> R { return (*static_cast<F*>(object))(std::forward<Args>(args)...); }) {}
  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }
  explicit operator bool() const noexcept { return call_ != nullptr; }

 private:
  void* object_ = nullptr;
  R (*call_)(void*, Args...) = nullptr;
};

struct NativeNode {
  cudaGraph_t graph;
  const std::vector<cudaGraphNode_t>& deps;
  const std::string& path;  ///< for CudaError
  /// Emits body `index` of the node into a new native graph, returned to the caller to own.
  FunctionRef<NativeGraph(std::uint32_t index)> body;
  /// Emits body `index` of the node into `graph`, a graph CUDA made for it (conditional bodies).
  FunctionRef<void(std::uint32_t index, cudaGraph_t graph)> fill_body;
  const Symbols& symbols;
  /// The node's own native value: made by prepare_native before the node's body is emitted,
  /// or set by add_native (graph memory); what its symbol resolves to.
  std::uint64_t& value;
  /// What emission learnt of the device (kernels' driver handles), and the driver context current
  /// on the emitting thread; null (as for an eager node's own graph): the runtime's calls.
  const DeviceContext* device = nullptr;
  CUcontext context = nullptr;
  /// Set by a kernel's add_native: the driver handle it added the node with (null: the runtime's
  /// call), which the executable keeps for the node's updates.
  cudaFunction_t function = nullptr;
  /// The node sits, at some depth, in a conditional node's body: CUDA's rules for those bodies
  /// apply to what it adds (a library node checks its recording against them).
  bool in_conditional_body = false;
};

/// One node of an executable being given its current parameters.
struct NativeUpdate {
  cudaGraphExec_t exec;
  cudaGraphNode_t native;
  const Symbols& symbols;
  cudaFunction_t function = nullptr;  ///< as NativeNode::function
  const Description* description = nullptr;  ///< the node's, for messages (node_path)
  NodeId id = no_node;
};

/// One node being launched on its own on a stream, and how to run its bodies likewise.
struct EagerNode {
  cudaStream_t stream;
  const std::string& path;
  std::function<void(std::uint32_t index)> run_body;
  const Symbols& symbols;
  std::uint64_t& value;  ///< as NativeNode::value
};

/// Result of an in-place update: the CUDA status and the call that produced it, or flowdsl's
/// own refusal (`reason`) where CUDA would accept an update that cannot work.
struct UpdateStatus {
  UpdateStatus() = default;
  UpdateStatus(cudaError_t status, const char* from, std::string why = {})
      : code(status), call(from), reason(std::move(why)) {}

  cudaError_t code = cudaSuccess;
  const char* call = "";
  std::string reason;  ///< empty: CUDA's status says it all
};

/// Memory type of a pointer as CUDA sees it (pageable host memory: cudaMemoryTypeUnregistered).
cudaMemoryType memory_type(const void* ptr);

/// Adds `body` to `node.graph` as a child graph node after `node.deps`, the parent graph taking
/// ownership of it (a child node's body, a library call's recording).
/// \throws CudaError naming `node.path` when CUDA refuses the node (`body` is then freed).
cudaGraphNode_t add_child_graph(NativeNode& node, NativeGraph body);

}  // namespace flowdsl::lowering
