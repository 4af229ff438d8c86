// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file argument_checks.hpp
/// \brief The checks a registered kernel's or library call's arguments pass, whoever gives them
/// (C++, a graph file or Python): each integer that sizes an extent is not negative, each
/// enumerated argument is one of its values, and each pointer's extent fits the memory it
/// points into, in overflow-checked arithmetic.
///
/// Validation runs them for every registered node; the Python bindings run them when a node is
/// declared or set, so that a bad size is refused before anything is launched.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flowdsl/node_parts.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl {

/// \brief Checks the bound integer arguments of `entry` by value: an argument that an extent
/// reads (a size, a count, an index) is not negative, and an enumerated one (KernelParam::
/// enumerators) is the number of one of its names; then, once every argument is bound and
/// passes those, the entry's own KernelInfo::check. Unbound slots are skipped.
/// \return the problems found, empty when there are none (then nothing is allocated).
[[nodiscard]] std::vector<ArgumentProblem> check_argument_values(const KernelInfo& entry, const ArgumentPack& args);

/// \brief The elements `value` (the extent of a pointer to `element_size`-byte elements) reaches
/// beyond `available_bytes`; 0 when it fits or is not known on the host. The comparison never
/// multiplies, so no count can wrap around to fit.
[[nodiscard]] std::uint64_t elements_beyond(const Extent::Value& value, std::size_t element_size,
                                            std::uint64_t available_bytes) noexcept;

/// \brief Checks `value`, the extent of pointer parameter `param` of `entry` (Extent::evaluate
/// with the node's arguments and launch shape), against the `available_bytes` from the pointer
/// to the end of its memory, which `memory` describes ("buffer 'x' (4096)", "a tensor of 4096").
/// \return the problem, or one with an empty message when the extent fits or is not known on
/// the host (data-dependent, or reading an unbound argument).
[[nodiscard]] ArgumentProblem check_reach(const KernelInfo& entry, std::uint32_t param, const Extent::Value& value,
                                          std::uint64_t available_bytes, std::string_view memory);

}  // namespace flowdsl
