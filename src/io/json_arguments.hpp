// SPDX-License-Identifier: Apache-2.0
// Arguments of registered entries (kernels and library calls) in graph files and DOT dumps: by
// parameter name, buffers for pointers, numbers for scalars (range-checked per type).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "dot_facets.hpp"
#include "json_facets.hpp"

namespace flowdsl::io {

/// The entry registered as `name` (`member`: "/kernel", "/call"), or null after reporting it
/// unknown (or declared in the file's kernel_files but not loaded).
const KernelInfo* find_entry(std::string_view name, const char* member, NodeBinder& binder);

/// One argument of a file, as the bytes of its parameter (8 at most: a scalar or a pointer).
struct BoundArgument {
  std::size_t index;
  unsigned char bytes[8];
};

/// Checks a node's "args" member `args` (absent: none) as read_json does: an object of numbers
/// and buffer references. Returns its members, each key once (the last of a repeated one).
/// \throws JsonError relative to the node
std::vector<CompactJson::Member> read_arguments(const std::optional<CompactJson::Ref>& args);
/// Appends "args" (as read_arguments returned them) to the fields `out` is writing: an empty
/// object when the node has none.
void write_arguments(CompactJson::Builder& out, const std::vector<CompactJson::Member>& args);

/// The file's arguments (`args`) of a node of `entry`, one per parameter; false after reporting
/// every unknown, missing or ill-typed one to `binder`. Condition arguments are left for the
/// caller to bind once the node is declared (their bytes are not set).
bool bind_arguments(CompactJson::Ref args, const KernelInfo& entry, NodeBinder& binder, std::vector<BoundArgument>& out);

/// The "args" object of a C++ node's arguments of `entry` (`described` false after a problem
/// that leaves the arguments undescribable: a count that differs from the entry's).
json describe_arguments(const ArgumentPack& args, const KernelInfo& entry, NodeDescriber& describer, bool& described);

/// Label lines "name = value" for each argument (names from `entry` when it matches, else "#i").
void dot_arguments(const ArgumentPack& args, const KernelInfo* entry, DotLabel& label);

}  // namespace flowdsl::io
