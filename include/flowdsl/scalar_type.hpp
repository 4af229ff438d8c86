// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file scalar_type.hpp
/// \brief Element types of kernel parameters and buffers, and the one dispatch over them.
///
/// Code that must treat each element type differently (convert a JSON number, print a value,
/// fill a buffer, name a .npy dtype) calls visit_scalar() with a generic lambda instead of
/// switching on ScalarType itself:
/// \code
///   std::size_t bytes = flowdsl::visit_scalar(type, [](auto tag) { return sizeof(typename decltype(tag)::type); });
/// \endcode
/// f16 and bf16 appear as flowdsl::half and flowdsl::bfloat16: host types with the same bits
/// as CUDA's __half and __nv_bfloat16, so that no CUDA header is needed here.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace flowdsl {

/// \brief Element types of kernel parameters and buffers.
enum class ScalarType : std::uint8_t { i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64 };

/// \brief An IEEE binary16 value as stored on the device (the bits of CUDA's __half).
struct half {
  std::uint16_t bits = 0;
  /// \brief Rounds to nearest even; out of range becomes infinity.
  static half from_double(double value) noexcept;
  double to_double() const noexcept;
  static constexpr double max = 65504.0;
};

/// \brief A bfloat16 value as stored on the device (the bits of CUDA's __nv_bfloat16).
struct bfloat16 {
  std::uint16_t bits = 0;
  /// \brief Rounds to nearest even; out of range becomes infinity.
  static bfloat16 from_double(double value) noexcept;
  double to_double() const noexcept;
  static constexpr double max = 3.3895313892515355e38;
};

/// \brief The type `visit_scalar` hands to its visitor: `typename decltype(tag)::type`.
template <class T>
struct ScalarTag {
  using type = T;
};

/// \brief Calls `visitor(ScalarTag<T>{})` with T the host type of `type` (std::int8_t ...
/// std::uint64_t, flowdsl::half, flowdsl::bfloat16, float, double) and returns its result.
template <class Visitor>
decltype(auto) visit_scalar(ScalarType type, Visitor&& visitor) {
  switch (type) {
    case ScalarType::i8: return visitor(ScalarTag<std::int8_t>{});
    case ScalarType::i16: return visitor(ScalarTag<std::int16_t>{});
    case ScalarType::i32: return visitor(ScalarTag<std::int32_t>{});
    case ScalarType::i64: return visitor(ScalarTag<std::int64_t>{});
    case ScalarType::u8: return visitor(ScalarTag<std::uint8_t>{});
    case ScalarType::u16: return visitor(ScalarTag<std::uint16_t>{});
    case ScalarType::u32: return visitor(ScalarTag<std::uint32_t>{});
    case ScalarType::u64: return visitor(ScalarTag<std::uint64_t>{});
    case ScalarType::f16: return visitor(ScalarTag<half>{});
    case ScalarType::bf16: return visitor(ScalarTag<bfloat16>{});
    case ScalarType::f32: return visitor(ScalarTag<float>{});
    case ScalarType::f64: break;
  }
  return visitor(ScalarTag<double>{});
}

/// \brief Whether T is flowdsl::half or flowdsl::bfloat16.
template <class T>
inline constexpr bool is_16bit_float = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

/// \brief `value` of a visited type as a double (16-bit floats widened exactly).
template <class T>
double to_double(T value) noexcept {
  if constexpr (is_16bit_float<T>) {
    return value.to_double();
  } else {
    return static_cast<double>(value);
  }
}

/// \brief "i32", "bf16", "f32", ...
std::string_view to_string(ScalarType type) noexcept;
/// \brief Parses the names to_string gives. \return false when `text` names no type.
bool parse_scalar_type(std::string_view text, ScalarType& out) noexcept;
/// \brief Size in bytes of one element.
std::size_t size_of(ScalarType type) noexcept;

}  // namespace flowdsl
