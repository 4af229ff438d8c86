// SPDX-License-Identifier: Apache-2.0
// A built-in kernel is stated once, as a descriptor: the name it is registered under, its
// parameter names, a one-line summary, the element types it is instantiated for, its
// __global__ function per instantiation and the rule that picks the launch shape from the
// arguments. declare<D, T...>() builds the typed node from it (the public launchers are one
// line each), register_kernels<D...>() registers every instantiation, and `flowdsl info`
// (and so the table in docs/kernels.md, which a test compares) lists what was registered.
//
// A descriptor D, usually written with FLOWDSL_KERNEL on a base that holds the shape rule:
//   static constexpr const char* name;         "scale": registered as "scale.f32", ...
//   static constexpr const char* params[];     one name per kernel parameter
//   static constexpr const char* summary;      one line for `flowdsl info`
//   template <class... T> static auto kernel();                  the __global__ function
//   template <class... T, class... A> static LaunchShape shape(const A&... args);
//   using instances = Instances<Types<...>...>;                  (Descriptor: float types)
//   static constexpr const char* variant, note;                  (Descriptor: none)
//   static constexpr bool grid_strides, grid_exact; block_exact<T...>()  (Descriptor: true, false, true)
//   template <class... T> static DerivedParameters derived();    when the kernel takes one
//                                     parameter more than `params` names: its derived parameters
#pragma once

#include <cstring>
#include <iterator>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common.cuh"
#include "flowdsl/kernels.hpp"

/// The element types of the typed kernels and the (In, Out) pairs of cast: X-macros for the
/// explicit instantiations of the launchers, and the instance lists of the descriptors.
#define FLOWDSL_FOR_EACH_FLOAT_TYPE(X) X(float) X(__half) X(__nv_bfloat16)
#define FLOWDSL_FOR_EACH_CAST(X) \
  X(float, __half) X(float, __nv_bfloat16) X(__half, float) X(__nv_bfloat16, float) X(__half, __nv_bfloat16) X(__nv_bfloat16, __half)

/// Explicitly instantiates the launcher `f<T...>` (its signature is the one declared).
#define FLOWDSL_INSTANTIATE(f, ...) template decltype(f<__VA_ARGS__>) f<__VA_ARGS__>;
#define FLOWDSL_INSTANTIATE_FLOAT_TYPES(f) FLOWDSL_INSTANTIATE(f, float) FLOWDSL_INSTANTIATE(f, __half) FLOWDSL_INSTANTIATE(f, __nv_bfloat16)

/// Declares descriptor `Desc` on `Base` (its shape rule and instances): registered name,
/// summary, the __global__ function as an expression of the element types `T...`, then the
/// parameter names.
#define FLOWDSL_KERNEL(Desc, Base, kernel_name, summary_text, function, ...) \
  struct Desc : Base {                                                       \
    static constexpr const char* name = kernel_name;                         \
    static constexpr const char* summary = summary_text;                     \
    static constexpr const char* params[] = {__VA_ARGS__};                   \
    template <class... T>                                                    \
    static auto kernel() {                                                   \
      return function;                                                       \
    }                                                                        \
  };

/// Registers every descriptor of an X-macro list of FLOWDSL_KERNEL arguments.
#define FLOWDSL_DESCRIPTOR_NAME(Desc, ...) , Desc
#define FLOWDSL_REGISTER_LIST(registry, LIST) \
  ::flowdsl::kernels::detail::register_kernels<void LIST(FLOWDSL_DESCRIPTOR_NAME)>(registry)

namespace flowdsl::kernels::detail {

/// The element types of one instantiation, and every instantiation of a descriptor.
template <class... T>
struct Types {};
template <class... I>
struct Instances {};
template <class Sentinel, class... I>
struct instances_after {
  using type = Instances<I...>;
};
#define FLOWDSL_AS_TYPES(...) , Types<__VA_ARGS__>
using FloatTypes = instances_after<void FLOWDSL_FOR_EACH_FLOAT_TYPE(FLOWDSL_AS_TYPES)>::type;
using CastTypes = instances_after<void FLOWDSL_FOR_EACH_CAST(FLOWDSL_AS_TYPES)>::type;
#undef FLOWDSL_AS_TYPES
using NoTypes = Instances<Types<>>;

/// What a descriptor leaves out.
struct Descriptor {
  using instances = FloatTypes;
  /// LaunchRule::grid_strides: the kernel strides over its work, any grid computes all of it.
  static constexpr bool grid_strides = true;
  /// LaunchRule::grid_exact: it runs with its rule's grid only.
  static constexpr bool grid_exact = false;
  /// LaunchRule::block_exact of kernel<T...>: it runs with its rule's block only.
  template <class... T>
  static constexpr bool block_exact() {
    return true;
  }
  /// LaunchRule::least_grid: whether the descriptor has least_grid<T...>(args...), the smallest
  /// grid that computes all of the output where it is less than shape()'s.
  static constexpr bool has_least_grid = false;
  static constexpr const char* variant = "";  ///< between the name and the type suffixes: "row_sum.warp.f32"
  static constexpr const char* note = "";     ///< appended to the summary
};

/// Type suffixes of registered names: "f32", "f16", "bf16", "i32".
template <class T>
const char* suffix();
template <>
inline const char* suffix<float>() { return "f32"; }
template <>
inline const char* suffix<__half>() { return "f16"; }
template <>
inline const char* suffix<__nv_bfloat16>() { return "bf16"; }
template <>
inline const char* suffix<std::int32_t>() { return "i32"; }

template <class F>
struct arity;
template <class... P>
struct arity<void (*)(P...)> : std::integral_constant<std::size_t, sizeof...(P)> {};

/// Whether kernel D<T...> takes derived parameters (DerivedParameters) after its named ones.
template <class D, class... T>
constexpr bool has_derived() {
  constexpr std::size_t params = arity<decltype(D::template kernel<T...>())>::value;
  static_assert(std::size(D::params) == params || std::size(D::params) + 1 == params,
                "flowdsl: a kernel descriptor must name every parameter of its kernel once (all but derived parameters)");
  return std::size(D::params) + 1 == params;
}

/// The node of kernel D<T...> with D's launch shape for these arguments, every argument bound.
template <class D, class... T, class... A>
auto declare(Into g, std::string node, const A&... args) {
  const LaunchShape shape = D::template shape<T...>(args...);
  auto with_function = [&]() {
    if constexpr (has_derived<D, T...>()) {
      return g.builder().kernel(std::move(node), D::template kernel<T...>(), D::template derived<T...>(), D::name);
    } else {
      return g.builder().kernel(std::move(node), D::template kernel<T...>(), D::name);
    }
  };
  return with_function()
      .launch(shape)
      .waits_for_producers()  // programmatic_prologue(): see common.cuh
      .args(args...);
}

template <class F>
struct params_of;
template <class... P>
struct params_of<void (*)(P...)> {
  using type = std::tuple<std::remove_cv_t<P>...>;
};
/// Calls `rule(values...)` with kernel D<T...>'s arguments as the registry holds them (one pointer
/// per parameter, to a value of its type), copied into values of the parameters' types.
template <class D, class... T, class Rule, std::size_t... I>
auto with_arguments(const void* const* args, Types<T...>, std::index_sequence<I...>, Rule&& rule) {
  using Params = typename params_of<decltype(D::template kernel<T...>())>::type;
  std::tuple<std::tuple_element_t<I, Params>...> values;
  (std::memcpy(&std::get<I>(values), args[I], sizeof(std::get<I>(values))), ...);
  return rule(std::get<I>(values)...);
}
template <class D, class... T, class Rule>
auto with_arguments(const void* const* args, Rule&& rule) {
  return with_arguments<D>(args, Types<T...>{}, std::make_index_sequence<std::size(D::params)>{}, std::forward<Rule>(rule));
}
/// LaunchRule::least_grid of kernel D<T...>.
template <class D, class... T>
Dim3 least_grid_of(const void* const* args) {
  return with_arguments<D, T...>(args, [](const auto&... v) { return D::template least_grid<T...>(v...); });
}
/// LaunchRule::shape of kernel D<T...>: D's shape rule on arguments as the registry holds them,
/// the one declare() applies.
template <class D, class... T>
LaunchShape shape_of(const void* const* args) {
  return with_arguments<D, T...>(args, [](const auto&... v) { return D::template shape<T...>(v...); });
}

/// The element function of an element-wise descriptor D (KernelInfo::element), for the fusion
/// pass; specialised next to the descriptors that have one, empty for the others.
template <class D>
struct ElementFunction {
  static constexpr const char* value = "";
};

template <class D, class... T>
void register_instance(KernelRegistry& registry, Types<T...>) {
  std::string name = std::string(D::name) + D::variant;
  ((name += std::string(".") + suffix<T>()), ...);
  std::vector<std::string> params(std::begin(D::params), std::end(D::params));
  std::string summary = std::string(D::summary) + D::note;
  LaunchRule launch{&shape_of<D, T...>, D::grid_strides, D::template block_exact<T...>(), D::grid_exact};
  if constexpr (D::has_least_grid) launch.least_grid = &least_grid_of<D, T...>;
  // Every kernel of the library starts with programmatic_prologue(): it waits for its producers.
  if constexpr (has_derived<D, T...>()) {
    registry.add(std::move(name), D::template kernel<T...>(), std::move(params), std::move(summary),
                 /*waits_for_producers=*/true, D::template derived<T...>(), launch);
  } else {
    registry.add(std::move(name), D::template kernel<T...>(), std::move(params), std::move(summary),
                 /*waits_for_producers=*/true, launch, ElementFunction<D>::value);
  }
}
template <class D, class... I>
void register_instances(KernelRegistry& registry, Instances<I...>) {
  (register_instance<D>(registry, I{}), ...);
}
/// Registers every instantiation of every descriptor D... (Sentinel: see FLOWDSL_REGISTER_LIST).
template <class Sentinel, class... D>
void register_kernels(KernelRegistry& registry) {
  (register_instances<D>(registry, typename D::instances{}), ...);
}

/// The finishing node of a two-pass sum (reduce.cu): out[0] = sum of partials (or its sqrt).
KernelNode<std::int32_t, const double*, std::int32_t, float*> declare_sum_finish(Into g, std::string name, std::int32_t count,
                                                                                const double* partials, bool take_sqrt,
                                                                                float* out);

void register_elementwise(KernelRegistry& registry);
void register_reductions(KernelRegistry& registry);
void register_batching(KernelRegistry& registry);
void register_simulation(KernelRegistry& registry);
void register_matmul(KernelRegistry& registry);
void register_conditions(KernelRegistry& registry);
void register_attention(KernelRegistry& registry);
void register_sampling(KernelRegistry& registry);
void register_linear(KernelRegistry& registry);
void register_cublaslt(KernelRegistry& registry);  // library calls (cublaslt.cpp)

/// Multiprocessors of the current device (132 on an H100 or H200; 132 also without a device),
/// asked of CUDA once per device: launch rules that size a grid to one resident wave.
int multiprocessors();

}  // namespace flowdsl::kernels::detail
