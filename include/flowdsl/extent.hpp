// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file extent.hpp
/// \brief Extents: how many elements a kernel's pointer parameter reads or writes, as an
/// expression of its scalar parameters and launch shape (`n`, `rows * cols`, `4 * n`,
/// `grid.x * grid.y`, or the data-dependent `offsets[batch]`).
///
/// A registered kernel declares one per pointer parameter (`"x: n"` in the parameter names of
/// KernelRegistry::add). flowdsl evaluates it with the node's arguments to check each pointer
/// against the buffer it points into and to derive the node's reads and writes for the hazard
/// check, so graphs of registered kernels need no hand-written accesses.
///
/// Grammar: sums, differences, products and floor quotients of non-negative integer literals,
/// integer scalar parameters, `grid.x|y|z` and `block.x|y|z`, with parentheses; `p[e]` reads
/// element `e` of the integer pointer parameter `p` on the device, which the host cannot know
/// (the extent is then *data-dependent*: taken to reach the end of its buffer).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flowdsl/node_parts.hpp"

namespace flowdsl {

struct KernelParam;

/// \brief A parsed extent expression, bound to the parameter list it was parsed against.
class Extent {
 public:
  /// \brief Parses `text` against `params` (names and types of the kernel).
  /// \throws UsageError naming the kernel parameter `param` and what is wrong with `text`.
  static Extent parse(std::string_view text, const std::vector<KernelParam>& params, std::string_view param);

  /// \brief The expression as written; empty when none was declared.
  const std::string& text() const noexcept { return text_; }
  /// \brief Whether no extent was declared (a default-constructed Extent).
  bool empty() const noexcept { return program_.empty(); }
  /// \brief Whether the value depends on device memory (`p[e]`).
  bool data_dependent() const noexcept { return data_dependent_; }
  /// \brief Whether the expression reads parameter `param` (by index, as the value of an
  /// integer or through a load).
  bool reads(std::uint32_t param) const noexcept;

  /// \brief The outcome of evaluating an extent.
  struct Value {
    enum class Kind : std::uint8_t {
      known,           ///< `elements` holds the count (negative results count as 0)
      data_dependent,  ///< depends on device memory
      unbound,         ///< a parameter it reads is not bound yet
      overflow,        ///< beyond 2^63 - 1 elements
    };
    Kind kind = Kind::known;
    std::uint64_t elements = 0;
  };
  /// \brief Evaluates the expression with the kernel's arguments (one slot per parameter of
  /// the parameter list it was parsed against) and launch shape.
  Value evaluate(const ArgumentPack& args, const LaunchShape& launch) const;

 private:
  enum class Code : std::uint8_t { constant, param, grid, block, add, sub, mul, div, load };
  struct Step {
    Code code;
    std::uint8_t axis = 0;         ///< grid/block: 0 x, 1 y, 2 z
    bool is_signed = false;        ///< param: how to read its bytes
    std::uint8_t size = 0;         ///< param: bytes of the integer
    std::uint32_t param = 0;       ///< param/load: parameter index
    std::int64_t value = 0;        ///< constant
  };
  friend class ExtentParser;

  std::string text_;
  std::vector<Step> program_;  ///< postfix
  bool data_dependent_ = false;
};

}  // namespace flowdsl
