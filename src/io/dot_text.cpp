// SPDX-License-Identifier: Apache-2.0
// Text helpers of DOT dumps, shared by the writer and the kinds' labels.
#include "dot_text.hpp"

#include <cstdio>
#include <cstring>
#include <sstream>

#include "lower/lowering_facets.hpp"

namespace flowdsl::io {

// Appends `text` escaped for a DOT double-quoted string: quotes and backslashes escaped,
// newlines as DOT's "\n", other control characters as spaces, invalid UTF-8 as U+FFFD.
void escape_into(std::string& out, std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c == '\n') {
        out += "\\n";
      } else if (c < 0x20 || c == 0x7f) {
        out += ' ';
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // A well-formed multi-byte sequence is copied; anything else becomes U+FFFD.
    const std::size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
    bool ok = len != 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) ok = (s[i + k] & 0xc0) == 0x80;
    if (ok && len == 3) ok = !(c == 0xe0 && s[i + 1] < 0xa0) && !(c == 0xed && s[i + 1] >= 0xa0);
    if (ok && len == 4) ok = !(c == 0xf0 && s[i + 1] < 0x90) && !(c == 0xf4 && s[i + 1] >= 0x90);
    if (ok) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
}

std::string quoted(std::string_view text) {
  std::string out = "\"";
  escape_into(out, text);
  return out + "\"";
}

std::string pointer_text(const void* p) {
  return detail::hex(reinterpret_cast<std::uintptr_t>(p));
}

AddressNames::AddressNames(const Description& description)
    : d_(description), index_(std::make_unique<lowering::BufferIndex>(description)) {}

AddressNames::~AddressNames() = default;

const NamedBuffer* AddressNames::holder(const void* p) { return index_->find(reinterpret_cast<std::uintptr_t>(p)); }

std::string AddressNames::operator()(const void* p) {
  const auto value = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p));
  if (symbol::is_symbol(value)) {
    // A symbol names its node even past the end of an alloc's memory, where no buffer holds it.
    const std::uint32_t index = symbol::index_of(value);
    if (index >= d_.symbols.size() || d_.symbols[index] >= d_.nodes.size()) return pointer_text(p);
    const NodeId owner = d_.symbols[index];
    if (is_conditional(d_.nodes[owner].op)) return "condition of '" + node_path(d_, owner) + "'";
    const std::uint64_t offset = symbol::offset_of(value);
    return node_path(d_, owner) + (offset == 0 ? std::string() : "+" + std::to_string(offset));
  }
  const NamedBuffer* b = holder(p);
  if (b == nullptr) return pointer_text(p);
  const std::uint64_t offset = value - reinterpret_cast<std::uintptr_t>(b->ptr);
  return b->name + (offset == 0 ? std::string() : "+" + std::to_string(offset));
}

std::string value_text(const ParamType& type, const void* bytes, AddressNames& names) {
  if (type.pointer) {
    const void* p = nullptr;
    std::memcpy(&p, bytes, sizeof p);
    return names(p);
  }
  return visit_scalar(type.scalar, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T value;
    std::memcpy(&value, bytes, sizeof(T));
    std::ostringstream out;
    if constexpr (is_16bit_float<T>) {
      out << static_cast<float>(value.to_double());
    } else if constexpr (sizeof(T) == 1) {
      out << +value;  // a number, not a character
    } else {
      out << value;
    }
    return out.str();
  });
}


}  // namespace flowdsl::io
