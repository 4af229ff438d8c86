// SPDX-License-Identifier: Apache-2.0
// The memory of plans that Graphs held, kept for the next plans of about their size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "flowdsl/plan.hpp"

namespace flowdsl::lowering {

/// What the process keeps at most, over every kept vector. A plan costs about 84 bytes a node
/// (its step and its position), so this holds the plans of some 400 000 nodes.
inline constexpr std::size_t plan_storage_bytes = std::size_t{32} << 20;
/// Plans of fewer nodes allocate as before: malloc serves vectors this small from memory it
/// keeps itself, while larger ones come as fresh pages, each costing a fault to touch.
inline constexpr std::size_t min_kept_steps = 1024;

/// An empty vector with room for `count` steps: kept memory when some fits, else new.
std::vector<PlanStep> take_steps(std::size_t count);
/// An empty vector with room for `count` positions, likewise.
std::vector<std::uint32_t> take_positions(std::size_t count);

/// `plan` shared, its step and position vectors kept for the next plans when the last owner
/// drops it (Graph::plan() hands out plans made this way).
std::shared_ptr<const Plan> share_plan(Plan&& plan);

/// Frees every kept vector.
void trim_plan_storage() noexcept;

}  // namespace flowdsl::lowering
