// SPDX-License-Identifier: Apache-2.0
// Integer expressions of a graph file's rank and world ({"expr": "4096 / world"}).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flowdsl::json_detail {

/// \brief Evaluates `text`: non-negative integer literals, `rank`, `world`, + - * / % and
/// parentheses, in unsigned 64-bit arithmetic. On failure returns false with `problem` saying
/// where and why (an unknown name, a division by zero, a negative or overflowing result).
bool evaluate_expression(std::string_view text, std::uint64_t rank, std::uint64_t world, std::uint64_t& value,
                         std::string& problem);

}  // namespace flowdsl::json_detail
