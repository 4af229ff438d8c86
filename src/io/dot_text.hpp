// SPDX-License-Identifier: Apache-2.0
// Text helpers of DOT dumps, shared by the writer and the kinds' labels.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "flowdsl/description.hpp"
#include "flowdsl/node_parts.hpp"
#include "flowdsl/registry.hpp"
#include "value_text.hpp"

namespace flowdsl::lowering {
class BufferIndex;
}

namespace flowdsl::io {

/// Appends `text` escaped for a DOT double-quoted string: quotes and backslashes escaped,
/// newlines as DOT's "\n", other control characters as spaces, invalid UTF-8 as U+FFFD.
void escape_into(std::string& out, std::string_view text);
/// `text` escaped and in double quotes.
std::string quoted(std::string_view text);
/// "256x1x1".
/// "0x7f..." as printf's %p.
std::string pointer_text(const void* p);

/// Names the addresses of one description's labels by the memory they point into: "input" or
/// "input+256" in a named buffer (Graph::buffer, a graph file's buffers), "scratch+64" in the
/// memory of alloc 'scratch', "condition of 'loop'" for a conditional node's condition, and
/// the address (pointer_text) when no buffer holds it.
class AddressNames {
 public:
  explicit AddressNames(const Description& description);
  ~AddressNames();
  AddressNames(const AddressNames&) = delete;
  AddressNames& operator=(const AddressNames&) = delete;

  std::string operator()(const void* p);
  /// The named buffer or alloc memory holding `p` (its name, start and size), or null.
  const NamedBuffer* holder(const void* p);

 private:
  const Description& d_;
  std::unique_ptr<lowering::BufferIndex> index_;
};

/// A value of a kernel parameter of `type`, from its bytes (pointers by `names`).
std::string value_text(const ParamType& type, const void* bytes, AddressNames& names);
/// "0x..." of `size` little-endian bytes, most significant first (base/value_text.hpp).
using detail::hex_bytes;

}  // namespace flowdsl::io
