// SPDX-License-Identifier: Apache-2.0
// Graphs from Python: Graph, Node and Body (declared node by node on the caller's tensors, their
// arguments checked by the library before they apply), graph files and the registry.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "bindings.hpp"
#include "flowdsl/dot.hpp"
#include "flowdsl/json.hpp"
#include "flowdsl/kernels.hpp"
#include "tensors.hpp"

using namespace nanobind::literals;

namespace flowdsl::python {

const KernelRegistry& registry() {
  static const KernelRegistry& r = [] () -> const KernelRegistry& {
    KernelRegistry& global = KernelRegistry::global();
    kernels::ensure_builtins(global);
    return global;
  }();
  return r;
}

namespace {

// Graph.fuse's docstring, naming the fusable kernels the registry holds (one source: their
// element functions), not a copy of the list.
const char* fuse_doc() {
  static const std::string doc = [] {
    std::vector<std::string> names;
    for (const KernelInfo* k : registry().list()) {
      if (k->element.empty()) continue;
      std::string base = k->name.substr(0, k->name.find('.'));
      if (std::find(names.begin(), names.end(), base) == names.end()) names.push_back(std::move(base));
    }
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    return "Runs each run of element-wise kernels (" + list + ") as one kernel generated for it and\n"
           "compiled with NVRTC at the first launch (docs/architecture.md, Fusion).";
  }();
  return doc.c_str();
}

// One argument converted and checked, not yet applied to a node: a call that is refused
// leaves the graph as it was.
struct Argument {
  const KernelParam* param = nullptr;
  std::uint32_t index = 0;               // the parameter's position
  std::array<unsigned char, 8> bytes{};  // the slot's value: an address, a number, a condition
  nb::handle object;                     // the tensor to keep alive; null for numbers and addresses
  std::size_t held_bytes = 0;            // the tensor's size (0: unknown)
};

// The arguments of one set() call: inline up to eight, so that a call allocates nothing.
class Arguments {
 public:
  explicit Arguments(std::size_t capacity) : capacity_(capacity) {
    if (capacity > inline_count) heap_.resize(capacity);
  }
  void push_back(const Argument& a) {
    if (size_ == capacity_) throw std::logic_error("flowdsl: more arguments than set() expected");
    data()[size_++] = a;
  }
  const Argument* begin() const { return data(); }
  const Argument* end() const { return data() + size_; }

 private:
  static constexpr std::size_t inline_count = 8;
  Argument* data() { return heap_.empty() ? inline_.data() : heap_.data(); }
  const Argument* data() const { return heap_.empty() ? inline_.data() : heap_.data(); }
  std::array<Argument, inline_count> inline_{};
  std::vector<Argument> heap_;
  std::size_t size_ = 0;
  std::size_t capacity_;
};

// Checks a node's arguments as validation will, before they are applied: the library's checks
// by value (sizes not negative, enumerations in range) and each tensor given to a pointer
// parameter against the parameter's extent, evaluated with `args` and `launch` (a library call
// has no launch shape; an extent that names an argument not bound yet, or a value in device
// memory, is checked at validation instead). `held_bytes(i)` is the size of the tensor bound to
// parameter i (0: none, or unknown). With `changed` (the arguments a set() call gives), only the
// parameters they affect are checked: one given, or a pointer whose extent reads one of them;
// the others passed when they were bound.
template <class HeldBytes, class NodeName>
void check_arguments(const KernelInfo& entry, const ArgumentPack& args, const LaunchShape& launch,
                     const HeldBytes& held_bytes, const NodeName& node_name, const Arguments* changed = nullptr) {
  const auto affected = [changed](std::uint32_t i, const Extent* extent) {
    if (changed == nullptr) return true;
    for (const Argument& a : *changed) {
      if (a.index == i || (extent != nullptr && extent->reads(a.index))) return true;
    }
    return false;
  };
  for (const ArgumentProblem& problem : check_argument_values(entry, args)) {
    if (affected(problem.param, nullptr)) usage("node " + q(node_name()) + ": " + problem.message);
  }
  for (std::uint32_t i = 0; i < entry.params.size() && i < entry.extents.size(); ++i) {
    const KernelParam& p = entry.params[i];
    if (!p.type.pointer || entry.extents[i].empty() || !affected(i, &entry.extents[i])) continue;
    const std::size_t bytes = held_bytes(i);
    if (bytes == 0) continue;
    const std::string memory = "a tensor of " + std::to_string(bytes / size_of(p.type.scalar));
    const ArgumentProblem problem = check_reach(entry, i, entry.extents[i].evaluate(args, launch), bytes, memory);
    if (!problem.message.empty()) usage("node " + q(node_name()) + ": " + problem.message);
  }
}

// A Python number (or an enumerator's name) as the bytes of a scalar parameter.
std::array<unsigned char, 8> scalar_bytes(const KernelParam& p, nb::handle value, const Where& where) {
  std::array<unsigned char, 8> out{};
  const ScalarType type = p.type.scalar;
  const bool is_float = type == ScalarType::f16 || type == ScalarType::bf16 || type == ScalarType::f32 ||
                        type == ScalarType::f64;
  if (nb::isinstance<nb::str>(value)) {
    const std::string text = nb::cast<std::string>(value);
    for (std::size_t i = 0; i < p.enumerators.size(); ++i) {
      if (p.enumerators[i] == text) {
        return visit_scalar(type, [&](auto tag) {
          using T = typename decltype(tag)::type;
          if constexpr (std::is_integral_v<T>) {
            const T v = static_cast<T>(i);
            std::memcpy(out.data(), &v, sizeof v);
          }
          return out;
        });
      }
    }
    usage(where() + ": " + q(text) + " is not a value of this parameter" +
          (p.enumerators.empty() ? std::string(" (it takes a number)") : ""));
  }
  if (!nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::float_>(value)) {
    usage(where() + ": expected a number for a " + std::string(to_string(type)) + " parameter, got " +
          nb::cast<std::string>(nb::str(value.type())));
  }
  if (is_float) {
    const double v = nb::cast<double>(value);
    return visit_scalar(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
        const T h = T::from_double(v);
        std::memcpy(out.data(), &h, sizeof h);
      } else if constexpr (std::is_floating_point_v<T>) {
        const T f = static_cast<T>(v);
        std::memcpy(out.data(), &f, sizeof f);
      }
      return out;
    });
  }
  if (nb::isinstance<nb::float_>(value)) {
    const double v = nb::cast<double>(value);
    if (v != std::floor(v)) usage(where() + ": " + std::to_string(v) + " is not an integer");
  }
  // Python ints are unbounded: range-check against the parameter's type, in C++ (the value as
  // a long long, or as an unsigned long long when it is larger).
  nb::object as_int = nb::int_(value);
  int overflow = 0;
  const long long small = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
  if (small == -1 && PyErr_Occurred()) throw nb::python_error();
  unsigned long long large = 0;
  if (overflow > 0) {
    large = PyLong_AsUnsignedLongLong(as_int.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      overflow = 2;  // beyond any 64-bit type
    }
  }
  return visit_scalar(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      bool fits = false;
      if (overflow == 0) {
        fits = std::is_signed_v<T> ? small >= static_cast<long long>(std::numeric_limits<T>::min()) &&
                                         small <= static_cast<long long>(std::numeric_limits<T>::max())
                                   : small >= 0 && static_cast<unsigned long long>(small) <= std::numeric_limits<T>::max();
      } else if (overflow == 1) {
        fits = !std::is_signed_v<T> && large <= std::numeric_limits<T>::max();
      }
      if (!fits) {
        usage(where() + ": " + nb::cast<std::string>(nb::str(value)) + " is out of range for " +
              std::string(to_string(type)));
      }
      const T v = overflow == 0 ? static_cast<T>(small) : static_cast<T>(large);
      std::memcpy(out.data(), &v, sizeof v);
    }
    return out;
  });
}

// Converts `value` for parameter `p` of `entry`: a conditional node for a condition, a tensor or
// an address for a pointer (its dtype and device checked), a number or an enumerator's name for
// a scalar.
template <class NodeName>
Argument convert_argument(PyGraph& g, const KernelInfo& entry, const KernelParam& p, nb::handle value,
                          const NodeName& node_name) {
  const Where where = [&node_name, &p] { return "node " + q(node_name()) + ", parameter " + q(p.name); };
  Argument out;
  out.param = &p;
  out.index = static_cast<std::uint32_t>(&p - entry.params.data());
  if (p.type.condition) {
    if (!nb::isinstance<PyNode>(value) || !nb::cast<const PyNode&>(value).conditional) {
      usage(where() + ": expects a conditional node (if_then, if_else, while_loop or switch_cases)");
    }
    const PyNode& c = nb::cast<const PyNode&>(value);
    if (c.owner.get() != &g) usage(where() + ": the conditional node belongs to another graph");
    const Condition condition = ConditionalNode(&g.graph.state(), c.id).condition();
    static_assert(sizeof condition <= sizeof out.bytes);
    std::memcpy(out.bytes.data(), &condition, sizeof condition);
    return out;
  }
  if (p.type.pointer) {
    const Memory m = memory_of(value, where);
    if (m.dtype && *m.dtype != p.type.scalar && !(size_of(*m.dtype) == size_of(p.type.scalar) && p.type.scalar == ScalarType::u8)) {
      usage(where() + ": expects " + std::string(dtype_name(p.type.scalar)) + " elements (" + to_string(p.type) + "), got a " +
            m.what());
    }
    if (!m.device) usage(where() + ": expects device memory, got a " + m.what() + " in host memory");
    const void* address = reinterpret_cast<const void*>(m.address);
    std::memcpy(out.bytes.data(), &address, sizeof address);
    if (!nb::isinstance<nb::int_>(value)) {
      out.object = value;
      out.held_bytes = m.bytes;
    }
    return out;
  }
  out.bytes = scalar_bytes(p, value, where);
  return out;
}

// Applies converted arguments to node `id` and keeps their tensors alive (an address given for a
// parameter drops the tensor held for it before).
template <class Node, class Args>
void apply_arguments(PyGraph& g, Node& node, NodeId id, const Args& args) {
  for (const Argument& a : args) {
    node.set_bytes(a.param->name, a.bytes.data(), a.param->type.size());
    if (a.param->type.pointer) {
      if (a.object.is_valid()) {
        g.held.set(id, a.index, Held{nb::borrow(a.object), a.held_bytes});
      } else {
        g.held.erase(id, a.index);
      }
    }
  }
}

// The size of the tensor each parameter will hold once `args` apply to node `id` (0: none).
template <class Args>
auto held_after(const PyGraph& g, NodeId id, const Args& args) {
  return [&g, id, &args](std::uint32_t index) -> std::size_t {
    for (const Argument& a : args) {
      if (a.index == index) return a.held_bytes;
    }
    const Held* held = g.held.find(id, index);
    return held == nullptr ? 0 : held->bytes;
  };
}

const KernelParam& param_of(const KernelInfo& entry, const std::string& node, const std::string& name) {
  const std::size_t i = entry.index_of(name);
  if (i == entry.params.size()) {
    std::string known;
    for (const KernelParam& p : entry.params) known += (known.empty() ? "" : ", ") + p.name;
    usage("node " + q(node) + ": " + q(entry.name) + " has no parameter " + q(name) + " (it takes " +
          known + ")");
  }
  return entry.params[i];
}

Dim3 dim_of(nb::handle v, const std::string& where) {
  if (nb::isinstance<nb::int_>(v)) return Dim3(nb::cast<std::uint32_t>(v));
  if (nb::isinstance<nb::tuple>(v) || nb::isinstance<nb::list>(v)) {
    std::vector<std::uint32_t> d = nb::cast<std::vector<std::uint32_t>>(v);
    if (d.empty() || d.size() > 3) usage(where + ": expected 1 to 3 extents");
    return Dim3(d[0], d.size() > 1 ? d[1] : 1, d.size() > 2 ? d[2] : 1);
  }
  usage(where + ": expected an int or a tuple of up to 3 ints");
}

const KernelInfo& entry_named(const std::string& name, const std::string& node) {
  const KernelInfo* info = registry().find(name);
  if (info == nullptr) usage("node " + q(node) + ": no kernel or library call is registered as " + q(name));
  return *info;
}

// g.kernel(name, kernel, grid=, block=, shared_bytes=, cluster=, **arguments). Every argument
// is converted and checked before the node is declared.
template <class Builder>
PyNode add_kernel(const std::shared_ptr<PyGraph>& g, Builder& b, std::string name, const std::string& kernel,
                  nb::kwargs kwargs) {
  const KernelInfo& info = entry_named(kernel, name);
  if (info.is_call()) usage("node " + q(name) + ": " + q(kernel) + " is a library call (use library())");
  const auto node_name = [&name] { return name; };
  std::optional<Dim3> grid, block, cluster;
  std::optional<std::uint32_t> shared;
  std::vector<Argument> args;
  for (auto [key, value] : kwargs) {
    const std::string k = nb::cast<std::string>(key);
    if (k == "grid") {
      grid = dim_of(value, "node " + q(name) + ", grid");
    } else if (k == "block") {
      block = dim_of(value, "node " + q(name) + ", block");
    } else if (k == "cluster") {
      cluster = dim_of(value, "node " + q(name) + ", cluster");
    } else if (k == "shared_bytes") {
      shared = nb::cast<std::uint32_t>(value);
    } else {
      args.push_back(convert_argument(*g, info, param_of(info, name, k), value, node_name));
    }
  }
  if (grid.has_value() != block.has_value()) {
    usage("node " + q(name) + ": give both grid and block, or neither (the kernel's rule)");
  }
  ArgumentPack trial = unbound_arguments(info);
  for (const Argument& a : args) trial.set(a.index, a.bytes.data(), a.param->type.size());
  std::optional<LaunchShape> launch;
  if (grid) {
    launch = LaunchShape{*grid, *block, shared.value_or(0), cluster.value_or(Dim3())};
  } else if (info.launch && args.size() == info.params.size()) {
    // The kernel's own rule, as its C++ launcher and graph files apply it.
    std::vector<const void*> pointers(info.params.size());
    for (std::size_t i = 0; i < pointers.size(); ++i) pointers[i] = trial.data(i);
    launch = info.launch.shape(pointers.data());
  }
  check_arguments(info, trial, launch.value_or(LaunchShape{}), held_after(*g, no_node, args), node_name);

  RegisteredKernelNode node = b.kernel(std::move(name), info);
  apply_arguments(*g, node, node.id(), args);
  if (grid) {
    node.grid(launch->grid).block(launch->block);
    if (shared) node.shared_memory(*shared);
    if (cluster) node.cluster(*cluster);
  } else if (launch) {
    node.launch(*launch);
  }
  return PyNode{g, node.id(), &info};
}

template <class Builder>
PyNode add_library(const std::shared_ptr<PyGraph>& g, Builder& b, std::string name, const std::string& call,
                   nb::kwargs kwargs) {
  const KernelInfo& info = entry_named(call, name);
  if (!info.is_call()) usage("node " + q(name) + ": " + q(call) + " is a kernel (use kernel())");
  const auto node_name = [&name] { return name; };
  std::vector<Argument> args;
  for (auto [key, value] : kwargs) {
    args.push_back(convert_argument(*g, info, param_of(info, name, nb::cast<std::string>(key)), value, node_name));
  }
  ArgumentPack trial = unbound_arguments(info);
  for (const Argument& a : args) trial.set(a.index, a.bytes.data(), a.param->type.size());
  check_arguments(info, trial, LaunchShape{}, held_after(*g, no_node, args), node_name);

  RegisteredLibraryNode node = b.library(std::move(name), info);
  apply_arguments(*g, node, node.id(), args);
  return PyNode{g, node.id(), &info};
}

// A conditional node's initial value, if given.
std::optional<ConditionDefault> condition_default(std::optional<std::uint32_t> initial) {
  if (!initial) return std::nullopt;
  return ConditionDefault{*initial};
}

// Methods every builder (Graph, Body) has.
template <class Class, class GetBuilder>
void builder_methods(Class& cls, GetBuilder get) {
  cls.def(
      "kernel",
      [get](typename Class::Type& self, std::string name, const std::string& kernel, nb::kwargs kwargs) {
        auto [g, b] = get(self);
        return add_kernel(g, b, std::move(name), kernel, kwargs);
      },
      "name"_a, "kernel"_a, "kwargs"_a,
      "Declares a kernel node of the registered kernel `kernel` (e.g. \"scale.f32\"). Keywords: grid, block,\n"
      "shared_bytes, cluster (else the kernel's own launch rule), then one per parameter: a tensor or address\n"
      "for a pointer (its dtype checked), a number (or an enumerator's name) for a scalar, a conditional node\n"
      "for a condition.");
  cls.def(
      "library",
      [get](typename Class::Type& self, std::string name, const std::string& call, nb::kwargs kwargs) {
        auto [g, b] = get(self);
        return add_library(g, b, std::move(name), call, kwargs);
      },
      "name"_a, "call"_a, "kwargs"_a, "Declares a library node of the registered call `call` (e.g. \"matmul.cublaslt.f16\").");
  cls.def(
      "memcpy",
      [get](typename Class::Type& self, std::string name, nb::handle dst, nb::handle src, std::optional<std::size_t> bytes) {
        auto [g, b] = get(self);
        const Memory d = memory_of(dst, [&] { return std::string("node " + q(name) + ", dst"); });
        const Memory s = memory_of(src, [&] { return std::string("node " + q(name) + ", src"); });
        std::size_t n = bytes ? *bytes : std::min(d.bytes ? d.bytes : s.bytes, s.bytes ? s.bytes : d.bytes);
        if (n == 0) usage("node " + q(name) + ": give bytes (neither end has a known size)");
        if ((d.bytes && n > d.bytes) || (s.bytes && n > s.bytes)) {
          usage("node " + q(name) + ": " + std::to_string(n) + " bytes exceed " + (d.bytes && n > d.bytes ? "dst's " + std::to_string(d.bytes) : "src's " + std::to_string(s.bytes)));
        }
        MemcpyNode node = b.memcpy(name, reinterpret_cast<void*>(d.address), reinterpret_cast<const void*>(s.address), n);
        if (!nb::isinstance<nb::int_>(dst)) g->held.set(node.id(), 0, Held{nb::borrow(dst), d.bytes});
        if (!nb::isinstance<nb::int_>(src)) g->held.set(node.id(), 1, Held{nb::borrow(src), s.bytes});
        return PyNode{g, node.id()};
      },
      "name"_a, "dst"_a, "src"_a, "bytes"_a = nb::none(),
      "Declares a copy of `bytes` bytes (default: the smaller of the two arrays) from src to dst.");
  cls.def(
      "memset",
      [get](typename Class::Type& self, std::string name, nb::handle dst, std::uint32_t value, std::optional<std::size_t> count,
            std::uint32_t element_size) {
        auto [g, b] = get(self);
        const Memory d = memory_of(dst, [&] { return std::string("node " + q(name) + ", dst"); });
        if (element_size != 1 && element_size != 2 && element_size != 4) {
          usage("node " + q(name) + ": element_size is " + std::to_string(element_size) + " (1, 2 or 4)");
        }
        const std::size_t n = count ? *count : d.bytes / element_size;
        if (n == 0) usage("node " + q(name) + ": give count (dst has no known size)");
        if (d.bytes && n > d.bytes / element_size) {  // compared in elements: n * element_size may wrap
          usage("node " + q(name) + ": " + std::to_string(n) + " elements of " + std::to_string(element_size) +
                " bytes exceed dst's " + std::to_string(d.bytes) + " bytes");
        }
        MemsetNode node = b.memset(name, reinterpret_cast<void*>(d.address), value, n, element_size);
        if (!nb::isinstance<nb::int_>(dst)) g->held.set(node.id(), 0, Held{nb::borrow(dst), d.bytes});
        return PyNode{g, node.id()};
      },
      "name"_a, "dst"_a, "value"_a, "count"_a = nb::none(), "element_size"_a = 1,
      "Declares a fill of `count` elements of `element_size` bytes (1, 2 or 4) with `value`; count=None:\n"
      "as many as dst holds (a tensor; an address has no size, so give count).");
  cls.def(
      "empty", [get](typename Class::Type& self, std::string name) {
        auto [g, b] = get(self);
        return PyNode{g, b.empty(std::move(name)).id()};
      },
      "name"_a, "Declares a node that does nothing (a join point for edges).");
  cls.def(
      "child", [get](typename Class::Type& self, std::string name) {
        auto [g, b] = get(self);
        return PyNode{g, b.child(std::move(name)).id()};
      },
      "name"_a, "Declares a child-graph node; declare its nodes in `node.body()`.");
  cls.def(
      "if_then", [get](typename Class::Type& self, std::string name, std::optional<std::uint32_t> initial) {
        auto [g, b] = get(self);
        return PyNode{g, b.if_then(std::move(name), condition_default(initial)).id(), nullptr, true};
      },
      "name"_a, "initial"_a = nb::none(), "Declares an IF node: body(0) runs when its condition is non-zero.");
  cls.def(
      "if_else", [get](typename Class::Type& self, std::string name, std::optional<std::uint32_t> initial) {
        auto [g, b] = get(self);
        return PyNode{g, b.if_else(std::move(name), condition_default(initial)).id(), nullptr, true};
      },
      "name"_a, "initial"_a = nb::none(), "Declares an IF node with an else: body(0) or body(1).");
  cls.def(
      "while_loop", [get](typename Class::Type& self, std::string name, std::optional<std::uint32_t> initial) {
        auto [g, b] = get(self);
        return PyNode{g, b.while_loop(std::move(name), condition_default(initial)).id(), nullptr, true};
      },
      "name"_a, "initial"_a = nb::none(), "Declares a WHILE node: body(0) runs while its condition is non-zero.");
  cls.def(
      "switch_cases",
      [get](typename Class::Type& self, std::string name, std::uint32_t cases, std::optional<std::uint32_t> initial) {
        auto [g, b] = get(self);
        return PyNode{g, b.switch_cases(std::move(name), cases, condition_default(initial)).id(), nullptr, true};
      },
      "name"_a, "cases"_a, "initial"_a = nb::none(), "Declares a SWITCH node of `cases` bodies.");
  cls.def(
      "alloc", [get](typename Class::Type& self, std::string name, std::size_t bytes) {
        auto [g, b] = get(self);
        return PyNode{g, b.alloc(std::move(name), bytes).id()};
      },
      "name"_a, "bytes"_a, "Declares graph memory of `bytes` bytes (its address: `node.address`).");
  cls.def(
      "free", [get](typename Class::Type& self, std::string name, const PyNode& alloc) {
        auto [g, b] = get(self);
        return PyNode{g, b.free(std::move(name), AllocNode(&g->graph.state(), alloc.id)).id()};
      },
      "name"_a, "alloc"_a, "Declares the release of an alloc node's memory.");
}

// Garbage collection: a Graph's tensors (and a node's graph) are references Python's collector
// must see, or a cycle through them (a tensor whose module holds the graph) would never be freed.
int graph_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  const PyGraph* g = nb::inst_ptr<PyGraph>(self);
  if (const int r = g->held.visit_objects([&](PyObject* object) {
        Py_VISIT(object);
        return 0;
      });
      r != 0) {
    return r;
  }
  for (const auto& entry : g->buffers) Py_VISIT(entry.second.ptr());
  return 0;
}
int graph_clear(PyObject* self) {
  PyGraph* g = nb::inst_ptr<PyGraph>(self);
  g->held.clear();
  g->buffers.clear();
  return 0;
}
int node_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  const PyNode* n = nb::inst_ptr<PyNode>(self);
  if (n->owner) {
    nb::handle graph = nb::find(n->owner.get());
    Py_VISIT(graph.ptr());
  }
  return 0;
}
int node_clear(PyObject* self) {
  nb::inst_ptr<PyNode>(self)->owner.reset();
  return 0;
}
PyType_Slot graph_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(graph_traverse)},
                             {Py_tp_clear, reinterpret_cast<void*>(graph_clear)},
                             {0, nullptr}};
PyType_Slot node_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(node_traverse)},
                            {Py_tp_clear, reinterpret_cast<void*>(node_clear)},
                            {0, nullptr}};

// An interned string, made once per name and kept for the process.

}  // namespace

void bind_graph(nb::module_& m) {
  nb::class_<PyNode>(m, "Node", "A node of a graph; keeps its graph alive.", nb::type_slots(node_slots))
      .def_prop_ro("name", &PyNode::name)
      .def_prop_ro("kernel", [](const PyNode& n) { return n.entry ? std::optional<std::string>(n.entry->name) : std::nullopt; })
      .def(
          "after",
          [](PyNode& self, nb::args nodes, bool programmatic) {
            NodeHandle h = self.handle();
            for (nb::handle n : nodes) {
              if (nb::isinstance<PyNode>(n)) {
                const PyNode& other = nb::cast<const PyNode&>(n);
                if (other.owner != self.owner) usage("node " + quoted_name(self.name()) + ": after() a node of another graph");
                NodeHandle o = other.handle();
                if (programmatic) h.after(o, flowdsl::programmatic); else h.after(o);
              } else {
                const std::string name = nb::cast<std::string>(n);
                if (programmatic) h.after(name, flowdsl::programmatic); else h.after(name);
              }
            }
            return self;
          },
          "nodes"_a, "programmatic"_a = false,
          "Runs this node after each of `nodes` (nodes or names in the same body); programmatic: the\n"
          "dependent may launch early (built-in kernels wait for their producers' writes).")
      .def(
          "set",
          [](nb::pointer_and_handle<PyNode> me, nb::kwargs kwargs) -> nb::typed<nb::object, PyNode> {
            PyNode& self = *me.p;
            if (self.entry == nullptr) usage("node " + quoted_name(self.name()) + ": set() is for kernel and library nodes");
            PyGraph& g = *self.owner;
            const KernelInfo& entry = *self.entry;
            const auto node_name = [&self] { return self.name(); };
            Arguments args(kwargs.size());
            for (auto [key, value] : kwargs) {
              const nb::str key_text = nb::borrow<nb::str>(key);
              const char* name = key_text.c_str();
              const std::size_t i = entry.index_of(name);
              if (i == entry.params.size()) (void)param_of(entry, self.name(), name);  // raises, naming the parameters
              args.push_back(convert_argument(g, entry, entry.params[i], value, node_name));
            }
            // Checked on a copy of the node's arguments: a refusal changes nothing.
            const Operation& op = g.graph.description().nodes[self.id].op;
            const auto* kernel = std::get_if<KernelOp>(&op);
            ArgumentPack trial = kernel != nullptr ? kernel->args : std::get<LibraryOp>(op).args;
            for (const Argument& a : args) trial.set(a.index, a.bytes.data(), a.param->type.size());
            check_arguments(entry, trial, kernel != nullptr ? kernel->launch : LaunchShape{}, held_after(g, self.id, args),
                          node_name, &args);
            if (entry.is_call()) {
              RegisteredLibraryNode node(&g.graph.state(), self.id, &entry);
              apply_arguments(g, node, self.id, args);
            } else {
              RegisteredKernelNode node(&g.graph.state(), self.id, &entry);
              apply_arguments(g, node, self.id, args);
            }
            return nb::borrow<nb::typed<nb::object, PyNode>>(me.h);  // the node itself, for chained calls
          },
          "kwargs"_a,
          "Changes arguments by parameter name: a parameter change, applied to the cached executable in place\n"
          "at the next launch (a tensor of the same dtype for a pointer, a number for a scalar).")
      .def(
          "body",
          [](const PyNode& self, std::uint32_t index) {
            (void)self.handle().body(index);  // checks the node has that body
            return PyBody{self.owner, self.id, index};
          },
          "index"_a = 0, "Body `index` of a child or conditional node, to declare nodes in.")
      .def_prop_ro("address", [](const PyNode& self) {
            const auto* op = std::get_if<AllocOp>(&self.owner->graph.description().nodes[self.id].op);
            if (op == nullptr) usage("node " + quoted_name(self.name()) + ": only alloc nodes have an address");
            return reinterpret_cast<std::uintptr_t>(AllocNode(&self.owner->graph.state(), self.id).ptr());
          }, "The address of an alloc node's memory (a symbol resolved at launch).")
      .def("__repr__", [](const PyNode& n) { return "<flowdsl.Node " + quoted_name(n.name()) + ">"; });

  nb::class_<PyBody> body(m, "Body", "A body of a child or conditional node: declare its nodes here.");
  builder_methods(body, [](PyBody& self) {
    return std::pair<std::shared_ptr<PyGraph>, Body>(self.owner, self.body());
  });

  nb::class_<PyGraph> graph(m, "Graph", "A graph declared node by node (see docs/python.md).", nb::type_slots(graph_slots));
  graph.def(nb::new_([]() { return std::make_shared<PyGraph>(); }))
      .def(
          "buffer",
          [](PyGraph& self, std::string name, nb::handle tensor, std::optional<std::size_t> bytes, bool output) {
            const Memory mem = memory_of(tensor, [&] { return std::string("buffer " + quoted_name(name)); });
            const std::size_t n = bytes ? *bytes : mem.bytes;
            if (n == 0) usage("buffer " + quoted_name(name) + ": give bytes (an address has no size)");
            if (output) {
              self.graph.output(name, reinterpret_cast<const void*>(mem.address), n);
            } else {
              self.graph.buffer(name, reinterpret_cast<const void*>(mem.address), n);
            }
            self.buffers[name] = nb::borrow(tensor);
            return &self;
          },
          "name"_a, "tensor"_a, "bytes"_a = nb::none(), "output"_a = false, nb::rv_policy::reference,
          "Names a tensor's memory: validation checks every registered kernel's pointer into it against its\n"
          "end, and messages and DOT name it. output=True: read after launches, so a fused graph stores\n"
          "what it writes there.")
      .def("check_hazards", [](PyGraph& self, bool on) { self.graph.check_hazards(on); return &self; }, "on"_a,
           nb::rv_policy::reference)
      .def("own_executable", [](PyGraph& self, bool on) { self.graph.own_executable(on); return &self; }, "on"_a,
           nb::rv_policy::reference,
           "Executables of its own, never shared with another Graph of equal topology (graphs launched in\n"
           "turn whose parameters differ, such as a Family's buckets).")
      .def("programmatic_edges", [](PyGraph& self, bool on) { self.graph.programmatic_edges(on); return &self; }, "on"_a,
           nb::rv_policy::reference, "Makes every edge between built-in kernels programmatic.")
      .def("fuse", [](PyGraph& self, bool on) {
             if (on) flowdsl::prepare_fused_kernel_compiler();  // NVRTC starts while the graph is built
             self.graph.fuse(on);
             return &self;
           }, "on"_a, nb::rv_policy::reference,
           fuse_doc())
      .def("fusion", [](const PyGraph& self) {
             return describe_fusion(self.graph.description(), plan_fusion(self.graph.description(), self.graph.plan()));
           },
           "The groups the fusion pass finds and why kernels were left out, one line each (what\n"
           "`flowdsl validate --fuse` prints), whether or not the graph fuses.")
      .def("validate", [](const PyGraph& self) { (void)self.graph.plan(); },
           "Validates the graph (and plans it); raises ValidationError listing every problem.")
      .def_prop_ro("topology_hash", [](const PyGraph& self) { return self.graph.topology_hash(); })
      .def("__len__", [](const PyGraph& self) { return self.graph.size(); })
      .def(
          "to_dot",
          [](const PyGraph& self, bool data_flow) {
            DotOptions options;
            options.data_flow = data_flow;
            return to_dot(self.graph, options);
          },
          "data_flow"_a = false, "The graph in Graphviz's DOT language.")
      .def(
          "describe",
          [](const PyGraph& self, std::string name) {
            std::vector<BufferSpec> specs;
            BufferAddresses addresses;
            for (const auto& entry : self.buffers) {
              const std::string& buffer = entry.first;
              const Memory mem = memory_of(entry.second, [&buffer] { return "buffer " + quoted_name(buffer); });
              if (!mem.dtype) usage("describe: buffer " + quoted_name(buffer) + " has no element type (an address)");
              BufferSpec spec;
              spec.name = buffer;
              spec.type = *mem.dtype;
              spec.count = static_cast<std::uint64_t>(mem.elements);
              specs.push_back(spec);
              addresses[buffer] = reinterpret_cast<void*>(mem.address);
            }
            return to_json_text(describe_graph(self.graph, std::move(name), std::move(specs), addresses, registry()));
          },
          "name"_a = "graph",
          "The graph as JSON text (flowdsl's graph-file format); every pointer must lie in a named buffer.");
  builder_methods(graph, [](PyGraph& self) {
    // The shared owner of `self` (Graph objects are held by shared_ptr).
    std::shared_ptr<PyGraph> owner = nb::cast<std::shared_ptr<PyGraph>>(nb::find(&self));
    return std::pair<std::shared_ptr<PyGraph>, Graph&>(owner, self.graph);
  });

  m.def(
      "load",
      [](const std::string& path, std::map<std::string, nb::object> buffers) {
        GraphSpec spec = read_graph_file(path);
        BufferAddresses addresses;
        auto g = std::make_shared<PyGraph>();
        for (const BufferSpec& b : spec.buffers) {
          const auto it = buffers.find(b.name);
          if (it == buffers.end()) usage(path + ": buffer " + quoted_name(b.name) + " of the file was not given");
          const Memory mem = memory_of(it->second, [&] { return std::string("buffer " + quoted_name(b.name)); });
          check_buffer_memory(b, mem.dtype, mem.bytes, "a " + mem.what(), path);
          addresses[b.name] = reinterpret_cast<void*>(mem.address);
          g->buffers[b.name] = it->second;
        }
        for (const auto& [name, object] : buffers) {
          if (addresses.find(name) == addresses.end()) usage(path + ": the file has no buffer " + quoted_name(name));
        }
        g->graph = bind_graph(spec, addresses, registry(), {}, path);
        return g;
      },
      "path"_a, "buffers"_a = std::map<std::string, nb::object>{},
      "Loads a graph file (untrusted input: checked within limits) on the given tensors, one per buffer\n"
      "the file declares; raises JsonError listing each problem at its JSON pointer.");
  m.def(
      "check_file",
      [](const std::string& path) {
        const GraphSpec spec = read_graph_file(path);
        check_graph(spec, registry());
      },
      "path"_a, "Validates a graph file without a GPU or buffers (what `flowdsl validate` does).");
  m.def(
      "fused_kernel_statistics",
      []() {
        const FusedKernelStatistics s = fused_kernel_statistics();
        std::map<std::string, double> out{{"compilations", static_cast<double>(s.compilations)},
                                          {"memory_hits", static_cast<double>(s.memory_hits)},
                                          {"disk_hits", static_cast<double>(s.disk_hits)},
                                          {"compile_seconds", s.compile_seconds},
                                          {"last_compile_seconds", s.last_compile_seconds}};
        return out;
      },
      "Fused kernels compiled and found since the process started: compilations, memory_hits, disk_hits,\n"
      "compile_seconds, last_compile_seconds.");
  m.def(
      "kernels",
      []() {
        std::vector<std::string> names;
        for (const KernelInfo* k : registry().list()) names.push_back(k->name);
        return names;
      },
      "The names of the registered kernels and library calls.");
  m.def(
      "kernel_params",
      [](const std::string& name) {
        const KernelInfo& info = entry_named(name, "?");
        std::vector<std::pair<std::string, std::string>> out;
        for (const KernelParam& p : info.params) out.emplace_back(p.name, to_string(p.type));
        return out;
      },
      "name"_a, "The parameters of a registered kernel: (name, type) pairs, e.g. ('x', 'const f32*').");
  m.def(
      "attention_splits",
      [](std::int32_t tokens, std::int32_t q_heads, std::int32_t kv_heads, std::int32_t head_dim, std::int32_t page_size,
         std::int32_t pages_per_seq, std::int32_t sequences, std::int32_t pages, std::int32_t max_context) {
        kernels::PagedKv kv;
        kv.q_heads = q_heads;
        kv.kv_heads = kv_heads;
        kv.head_dim = head_dim;
        kv.page_size = page_size;
        kv.pages_per_seq = pages_per_seq;
        kv.sequences = sequences;
        kv.pages = pages;
        const kernels::AttentionSplits s = kernels::attention_splits(tokens, kv, max_context);
        return std::pair<std::int32_t, std::int32_t>(s.splits, s.split_len);
      },
      "tokens"_a, "q_heads"_a, "kv_heads"_a, "head_dim"_a, "page_size"_a, "pages_per_seq"_a, "sequences"_a, "pages"_a,
      "max_context"_a,
      "(splits, split_len) for decode_attention_partial.<t> over `tokens` tokens of contexts up to max_context,\n"
      "as the C++ launcher decode_attention picks them; the workspace ('partial') holds\n"
      "tokens * q_heads * splits * (head_dim + 2) floats.");
}

}  // namespace flowdsl::python
