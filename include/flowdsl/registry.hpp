// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file registry.hpp
/// \brief Kernels known by name, with named, typed parameters: what JSON arguments are
/// checked against and what tools list.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <type_traits>
#include <vector>

#include <unordered_map>

#include "flowdsl/condition.hpp"
#include "flowdsl/error.hpp"
#include "flowdsl/extent.hpp"
#include "flowdsl/node_parts.hpp"
#include "flowdsl/scalar_type.hpp"

// CUDA's 16-bit float types, declared so that kernels taking them can be registered without
// this header needing CUDA's (their definitions come with cuda_fp16.h and cuda_bf16.h).
struct __half;
struct __nv_bfloat16;
// CUDA's stream type (cudaStream_t is CUstream_st*), for library calls' signatures.
struct CUstream_st;

namespace flowdsl {

/// \brief Type of one kernel parameter: a scalar by value, a pointer to a buffer of scalars, or
/// a flowdsl::Condition.
struct ParamType {
  ScalarType scalar = ScalarType::f32;
  bool pointer = false;
  bool is_const = false;  ///< for pointers: the kernel only reads the buffer
  /// A flowdsl::Condition (8 bytes, bound to a conditional node; scalar and pointer unused).
  bool condition = false;

  std::size_t size() const noexcept { return pointer || condition ? sizeof(void*) : size_of(scalar); }
  std::size_t align() const noexcept { return size(); }
  /// What an argument slot of this type holds.
  SlotKind slot_kind() const noexcept {
    return condition ? SlotKind::condition : pointer ? SlotKind::pointer : SlotKind::value;
  }
  friend bool operator==(const ParamType& a, const ParamType& b) {
    return a.scalar == b.scalar && a.pointer == b.pointer && a.is_const == b.is_const && a.condition == b.condition;
  }
};

/// \brief "f32", "const f32*", "bf16*".
std::string to_string(const ParamType& type);

namespace detail {
template <class T>
struct scalar_of;
#define FLOWDSL_SCALAR(T, S) \
  template <>                \
  struct scalar_of<T> {      \
    static constexpr ScalarType value = ScalarType::S; \
  };
FLOWDSL_SCALAR(std::int8_t, i8)
FLOWDSL_SCALAR(std::int16_t, i16)
FLOWDSL_SCALAR(std::int32_t, i32)
FLOWDSL_SCALAR(std::int64_t, i64)
FLOWDSL_SCALAR(std::uint8_t, u8)
FLOWDSL_SCALAR(std::uint16_t, u16)
FLOWDSL_SCALAR(std::uint32_t, u32)
FLOWDSL_SCALAR(std::uint64_t, u64)
FLOWDSL_SCALAR(__half, f16)
FLOWDSL_SCALAR(__nv_bfloat16, bf16)
FLOWDSL_SCALAR(half, f16)
FLOWDSL_SCALAR(bfloat16, bf16)
FLOWDSL_SCALAR(float, f32)
FLOWDSL_SCALAR(double, f64)
#undef FLOWDSL_SCALAR
template <class T, class = void>
struct has_scalar : std::false_type {};
template <class T>
struct has_scalar<T, std::void_t<decltype(scalar_of<T>::value)>> : std::true_type {};
// long long is int64_t on LP64 only when they are the same type; map the other one too.
template <class T>
using canonical_t = std::conditional_t<
    std::is_same_v<T, long long> && !std::is_same_v<long long, std::int64_t>, std::int64_t,
    std::conditional_t<std::is_same_v<T, unsigned long long> && !std::is_same_v<unsigned long long, std::uint64_t>,
                       std::uint64_t, T>>;
}  // namespace detail

/// \brief The ParamType of a C++ kernel parameter type (scalars and pointers to scalars).
template <class T>
constexpr ParamType param_type_of() {
  if constexpr (std::is_same_v<std::remove_cv_t<T>, Condition>) {
    return ParamType{ScalarType::u64, false, false, true};
  } else if constexpr (std::is_pointer_v<T>) {
    using Pointee = std::remove_cv_t<std::remove_pointer_t<T>>;
    static_assert(detail::has_scalar<detail::canonical_t<Pointee>>::value,
                  "flowdsl: registered kernels take pointers to i8..u64, f16, bf16, f32 or f64 only");
    return ParamType{detail::scalar_of<detail::canonical_t<Pointee>>::value, true,
                     std::is_const_v<std::remove_pointer_t<T>>};
  } else {
    static_assert(detail::has_scalar<detail::canonical_t<std::remove_cv_t<T>>>::value,
                  "flowdsl: registered kernels take scalars i8..u64, f16, bf16, f32, f64 or pointers to them");
    return ParamType{detail::scalar_of<detail::canonical_t<std::remove_cv_t<T>>>::value, false, false};
  }
}

/// \brief What a library call returned: 0 for success, else its status (a cudaError_t,
/// cublasStatus_t, ncclResult_t, ...: every CUDA library's success is 0).
using CallStatus = std::int64_t;

/// \brief Calls a library call's function (`function`, its address) on `stream` with the
/// arguments at `args` (one pointer per parameter, to a value of that parameter's type).
using StreamInvoker = CallStatus (*)(const void* function, CUstream_st* stream, void* const* args);

namespace detail {
template <class R>
CallStatus status_of(R value) {
  if constexpr (std::is_enum_v<R>) {
    return static_cast<CallStatus>(static_cast<std::underlying_type_t<R>>(value));
  } else if constexpr (std::is_same_v<R, bool>) {
    return value ? 0 : 1;  // true: it worked
  } else {
    static_assert(std::is_integral_v<R>, "flowdsl: a library call returns void, a status enum (cudaError_t, "
                                         "cublasStatus_t, ...), an integer status (0: success) or bool (true: success)");
    return static_cast<CallStatus>(value);
  }
}
template <class R, class... Params, std::size_t... I>
CallStatus invoke_call(const void* function, CUstream_st* stream, void* const* args, std::index_sequence<I...>) {
  const auto call = reinterpret_cast<R (*)(CUstream_st*, Params...)>(const_cast<void*>(function));
  if constexpr (std::is_void_v<R>) {
    call(stream, *static_cast<std::remove_cv_t<Params>*>(args[I])...);
    return 0;
  } else {
    return status_of(call(stream, *static_cast<std::remove_cv_t<Params>*>(args[I])...));
  }
}
/// The StreamInvoker of a call of type R(CUstream_st*, Params...).
template <class R, class... Params>
CallStatus invoke(const void* function, CUstream_st* stream, void* const* args) {
  return invoke_call<R, Params...>(function, stream, args, std::index_sequence_for<Params...>{});
}
}  // namespace detail

/// \brief One refused argument of a registered kernel or library call: the parameter's index in
/// KernelInfo::params and what is wrong, a sentence that starts with "argument '<name>'". An
/// empty message means nothing is wrong.
struct ArgumentProblem {
  std::uint32_t param = 0;
  std::string message;
};

/// \brief What a registered entry refuses beyond its parameters' types, extents and named values,
/// from the arguments at `args` (one pointer per parameter, to a value of its type).
using ArgumentCheck = ArgumentProblem (*)(const void* const* args);

/// \brief One named parameter of a registered kernel.
struct KernelParam {
  std::string name;
  ParamType type;
  /// Pointers: the elements the kernel reads or writes through it, an expression of the
  /// scalar parameters (flowdsl/extent.hpp); empty: not declared, so not checked.
  std::string extent;
  /// Integer scalars with named values (an enumeration): the name of value i, declared as
  /// `"activation: {none, relu, gelu, silu}"`. Graph files may give the name or the number.
  std::vector<std::string> enumerators = {};

  /// \brief The name of `value`, or empty when it has none.
  std::string_view enumerator(std::int64_t value) const noexcept {
    return value >= 0 && static_cast<std::uint64_t>(value) < enumerators.size() ? std::string_view(enumerators[value])
                                                                                 : std::string_view();
  }
  /// \brief The name of the value at `bytes` (a value of this parameter's type), or empty.
  std::string_view enumerator_at(const void* bytes) const noexcept;
};

/// \brief How a kernel picks its launch shape from its arguments, and which other shapes it
/// computes correctly with: what a graph file's node of it may omit or must respect.
struct LaunchRule {
  /// The shape for the arguments at `args` (one pointer per parameter, to a value of its type;
  /// a condition's value is unspecified). Null: the kernel has no rule, a node states its shape.
  LaunchShape (*shape)(const void* const* args) = nullptr;
  /// Whether the kernel strides over its work, so that any grid computes all of it; else each
  /// block computes its own part, and a grid smaller than the rule's in any dimension leaves
  /// part of the output uncomputed.
  bool grid_strides = true;
  /// Whether the block must be the rule's; else any block of at most the rule's threads.
  bool block_exact = true;
  /// Whether the grid must be the rule's: a kernel whose every block would do the one thing it
  /// does (set a condition, count a pass), so that a larger grid repeats or races it.
  bool grid_exact = false;
  /// For a kernel that does not stride: the smallest grid that still computes all of the output
  /// for the arguments at `args`, where it is less than the shape's (a matrix multiply whose rule
  /// splits k across more blocks than it needs); null: the shape's grid.
  Dim3 (*least_grid)(const void* const* args) = nullptr;
  // Shared memory: at least the rule's (what the kernel's fastest path needs).

  explicit operator bool() const noexcept { return shape != nullptr; }
};

/// \brief A kernel known by name.
struct KernelInfo {
  std::string name;
  const void* function = nullptr;  ///< host stub of a __global__ function, or a cudaKernel_t
  std::vector<KernelParam> params;
  std::string summary;             ///< one line for `flowdsl info`
  /// One per parameter, parsed from KernelParam::extent by KernelRegistry::add (empty for
  /// scalars and for pointers without a declared extent).
  std::vector<Extent> extents;
  /// Whether the kernel waits for its producers before reading what they wrote (and lets its
  /// dependents launch early), so that its edges may be programmatic: every built-in kernel
  /// does (Graph::programmatic_edges).
  bool waits_for_producers = false;
  /// Parameters the kernel takes after `params`, computed from the arguments (DerivedParameters);
  /// its function then has one parameter more than `params` lists.
  DerivedParameters derived;
  /// Set for a library call (a function that enqueues work on a stream, recorded into a library
  /// node): `function` is then the call's address, called through this. Null for kernels.
  StreamInvoker call = nullptr;
  /// How the kernel picks its launch shape: set for the built-in kernels (the rule their C++
  /// launchers apply), unset for kernels registered without one.
  LaunchRule launch = {};
  /// For an element-wise kernel, what Graph::fuse may merge with its neighbours: element `i` of
  /// its one non-const pointer parameter (the output) as a CUDA C expression over `float`s,
  /// naming scalar parameters and the elements of pointer parameters by parameter name and the
  /// index as `i` (`"a * x"`, `"fmaf(a, x, y)"`), evaluated as the kernel does: the same float
  /// operations, with its contractions written out as fmaf (fused kernels are compiled without
  /// contraction). The output's extent, an expression of integer parameters, is the element
  /// count; a pointer with the same extent is read at `i`, one the function indexes (`bias[i %
  /// cols]`, const) at that index. `activate(act, x)` applies the built-in activations
  /// (flowdsl::kernels::Activation). Empty: the kernel is never fused.
  std::string element;
  /// What the kernel or call would refuse when it runs that its parameters' types, extents and
  /// named values do not say (cuBLASLt's `k` of 0, a bias missing for a bias epilogue): run by
  /// validation once every argument is bound, so that a refusal is invalid input found before
  /// anything is recorded or launched. Null: nothing more.
  ArgumentCheck check = nullptr;

  /// \brief Whether this entry is a library call rather than a kernel.
  bool is_call() const noexcept { return call != nullptr; }
  /// \brief Index of the parameter called `param`, or params.size() when there is none.
  std::size_t index_of(std::string_view param) const noexcept;
  /// \brief Whether every pointer parameter declares its extent, so that nodes of this
  /// kernel are checked against their buffers.
  bool checked() const noexcept;
};

/// \brief Kernels by name. Thread-safe. Entries are never removed, so references stay valid.
class KernelRegistry {
 public:
  /// \brief The process-wide registry (empty until something registers into it).
  static KernelRegistry& global();

  /// \brief Adds a kernel, parsing the extents of its parameters into `extents`.
  /// \throws UsageError when the name is empty or taken, the function is null, two
  ///         parameters share a name, or an extent is not valid (or given for a scalar).
  const KernelInfo& add(KernelInfo info);

  /// \brief Adds a `__global__` function; parameter types come from its signature.
  /// \param param_names one name per parameter; a pointer's may carry its extent after a
  ///        colon: `{"n", "a", "x: n", "y: n"}` (flowdsl/extent.hpp), an integer's the names of
  ///        its values: `"activation: {none, relu, gelu}"` (KernelParam::enumerators)
  /// \param launch the rule that picks the launch shape from the arguments, if the kernel has one
  /// \throws UsageError as add(KernelInfo), or when the number of names differs from the
  ///         number of parameters.
  template <class... Params>
  const KernelInfo& add(std::string name, void (*function)(Params...), std::vector<std::string> param_names,
                        std::string summary = {}, bool waits_for_producers = false, LaunchRule launch = {},
                        std::string element = {}) {
    if (param_names.size() != sizeof...(Params)) {
      throw UsageError("flowdsl: kernel '" + name + "' takes " + std::to_string(sizeof...(Params)) +
                       " parameters but " + std::to_string(param_names.size()) + " names were given");
    }
    KernelInfo info{std::move(name), reinterpret_cast<const void*>(function), {}, std::move(summary), {},
                    waits_for_producers, {}, nullptr, launch, std::move(element), nullptr};
    const ParamType types[] = {param_type_of<Params>()..., ParamType{}};
    for (std::size_t i = 0; i < sizeof...(Params); ++i) info.params.push_back(split_param(param_names[i], types[i]));
    return add(std::move(info));
  }

  /// \brief Adds a `__global__` function whose last parameter is derived from the others
  /// (DerivedParameters): `param_names` names the others, the arguments of its nodes.
  /// \throws UsageError as add(KernelInfo), or when the number of names is not one less than the
  ///         number of parameters, or `derived` is not the size of the last parameter.
  template <class... Params>
  const KernelInfo& add(std::string name, void (*function)(Params...), std::vector<std::string> param_names,
                        std::string summary, bool waits_for_producers, DerivedParameters derived, LaunchRule launch = {}) {
    static_assert(sizeof...(Params) > 0, "flowdsl: a kernel with derived parameters takes them as its last parameter");
    using Last = std::tuple_element_t<sizeof...(Params) - 1, std::tuple<Params...>>;
    static_assert(std::is_trivially_copyable_v<Last>, "flowdsl: derived parameters must be trivially copyable");
    if (param_names.size() + 1 != sizeof...(Params)) {
      throw UsageError("flowdsl: kernel '" + name + "' takes " + std::to_string(sizeof...(Params) - 1) +
                       " arguments before its derived parameters but " + std::to_string(param_names.size()) +
                       " names were given");
    }
    if (!derived || derived.bytes != sizeof(Last)) {
      throw UsageError("flowdsl: kernel '" + name + "': its derived parameters must be computed (compute set) and be " +
                       std::to_string(sizeof(Last)) + " bytes, the size of its last parameter");
    }
    KernelInfo info{std::move(name), reinterpret_cast<const void*>(function), {}, std::move(summary), {},
                    waits_for_producers, derived, nullptr, launch, {}, nullptr};
    add_params<std::tuple<Params...>>(info, param_names, std::make_index_sequence<sizeof...(Params) - 1>{});
    return add(std::move(info));
  }

  /// \brief Adds a library call: a function that enqueues work on the stream it is given
  /// (cuBLASLt, NCCL, ...), for library nodes (flowdsl/kinds/library.hpp) and graph files to use
  /// by name. Parameter types come from its signature after the stream.
  /// \param param_names as for kernels, extents included: `{"n", "x: n", "y: n"}`
  /// \param check what the call refuses beyond types, extents and named values (KernelInfo::check)
  /// \throws UsageError as add(KernelInfo), or when the number of names differs from the
  ///         number of parameters.
  template <class R, class... Params>
  const KernelInfo& add_call(std::string name, R (*function)(CUstream_st*, Params...),
                             std::vector<std::string> param_names, std::string summary = {},
                             ArgumentCheck check = nullptr) {
    if (param_names.size() != sizeof...(Params)) {
      throw UsageError("flowdsl: library call '" + name + "' takes " + std::to_string(sizeof...(Params)) +
                       " parameters after its stream but " + std::to_string(param_names.size()) + " names were given");
    }
    KernelInfo info{std::move(name), reinterpret_cast<const void*>(function), {}, std::move(summary), {}, false, {},
                    &detail::invoke<R, Params...>, {}, {}, check};
    const ParamType types[] = {param_type_of<Params>()..., ParamType{}};
    for (std::size_t i = 0; i < sizeof...(Params); ++i) info.params.push_back(split_param(param_names[i], types[i]));
    return add(std::move(info));
  }

  /// \brief The kernel called `name`, or null.
  const KernelInfo* find(std::string_view name) const;
  /// \brief The first kernel registered with `function`, or null.
  const KernelInfo* find_function(const void* function) const;
  /// \brief Every kernel, sorted by name.
  std::vector<const KernelInfo*> list() const;

 private:
  static KernelParam split_param(const std::string& declared, const ParamType& type);
  template <class Tuple, std::size_t... I>
  static void add_params(KernelInfo& info, const std::vector<std::string>& names, std::index_sequence<I...>) {
    (info.params.push_back(split_param(names[I], param_type_of<std::tuple_element_t<I, Tuple>>())), ...);
  }

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<KernelInfo>, std::less<>> kernels_;
  std::unordered_map<const void*, const KernelInfo*> by_function_;  ///< first entry per function
};

/// \brief What a node that calls a registered function (a kernel, a library call) runs: the
/// function, its registered entry when the node was declared from one, and its arguments (a
/// kind states it with `registered_call()`, kind_traits.hpp). What reads it (the extents of its
/// pointers) finds the entry by `function` otherwise.
struct RegisteredCall {
  const KernelInfo* info = nullptr;
  const void* function = nullptr;
  const ArgumentPack* args = nullptr;
  std::string_view action;  ///< for messages: "runs a kernel", "calls a library function"
};

}  // namespace flowdsl
