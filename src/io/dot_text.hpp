// Text helpers of DOT dumps, shared by the writer and the kinds' labels.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "flowdsl/description.hpp"
#include "flowdsl/node_parts.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl::io {

/// Appends `text` escaped for a DOT double-quoted string: quotes and backslashes escaped,
/// newlines as DOT's "\n", other control characters as spaces, invalid UTF-8 as U+FFFD.
void escape_into(std::string& out, std::string_view text);
/// `text` escaped and in double quotes.
std::string quoted(std::string_view text);
/// "256x1x1".
std::string dims(const Dim3& d);
/// "0x7f..." as printf's %p; a symbolic address of `description`, by what it stands for:
/// "'scratch'", "'scratch' + 64", "condition of 'loop'".
std::string pointer_text(const void* p, const Description* description = nullptr);
/// A value of a kernel parameter of `type`, from its bytes (pointers as pointer_text).
std::string value_text(const ParamType& type, const void* bytes, const Description* description = nullptr);
/// "0x..." of `size` little-endian bytes, most significant first.
std::string hex_bytes(const void* bytes, std::size_t size);

}  // namespace flowdsl::io
