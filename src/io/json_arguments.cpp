// SPDX-License-Identifier: Apache-2.0
// Arguments of registered entries in graph files and DOT dumps: binding, describing, labels.
#include "json_arguments.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "dot_text.hpp"

namespace flowdsl::io {

using namespace json_detail;

namespace {

std::string list_names(const std::vector<KernelParam>& params) {
  std::string out;
  for (const KernelParam& p : params) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

// Stores a number of the file as a scalar of the visited type `T`; empty on success, else what
// was expected.
template <class T, class J>
std::string store_scalar(const J& v, unsigned char* out) {
  T value{};
  if constexpr (std::is_integral_v<T>) {
    using limits = std::numeric_limits<T>;
    const auto range = [] { return "[" + std::to_string(limits::min()) + ", " + std::to_string(limits::max()) + "]"; };
    if (v.is_number_float()) return "expected an integer in " + range() + ", found a number with a fraction or exponent";
    if (v.is_number_unsigned()) {
      const std::uint64_t u = unsigned_of(v);
      if (u > static_cast<std::uint64_t>(limits::max())) return "value " + std::to_string(u) + " is out of range " + range();
      value = static_cast<T>(u);
    } else {
      const std::int64_t i = integer_of(v);
      if (i < static_cast<std::int64_t>(limits::min()) ||
          (i > 0 && static_cast<std::uint64_t>(i) > static_cast<std::uint64_t>(limits::max()))) {
        return "value " + std::to_string(i) + " is out of range " + range();
      }
      value = static_cast<T>(i);
    }
  } else {
    const double max = [] {
      if constexpr (is_16bit_float<T>) {
        return T::max;
      } else {
        return static_cast<double>(std::numeric_limits<T>::max());
      }
    }();
    const double d = number_of(v);
    if (!(std::fabs(d) <= max)) {
      return "value " + std::to_string(d) + " is out of range of the type (largest " + std::to_string(max) + ")";
    }
    if constexpr (is_16bit_float<T>) {
      value = T::from_double(d);
    } else {
      value = static_cast<T>(d);
    }
  }
  std::memcpy(out, &value, sizeof(T));
  return {};
}

std::string list_enumerators(const KernelParam& param) {
  std::string out;
  for (const std::string& name : param.enumerators) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// The bytes of the value named `name` of an enumerated parameter; false after reporting an
// unknown name at `where`.
bool bind_enumerator(const std::string& name, const KernelParam& param, const std::string& where, NodeBinder& binder,
                     unsigned char* out) {
  const auto& names = param.enumerators;
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) {
    binder.problem(where, "parameter " + quoted_name(param.name) + ": unknown value " + quoted_name(name) + " (values: " +
                              list_enumerators(param) + ", or their numbers 0 to " + std::to_string(names.size() - 1) +
                              ")");
    return false;
  }
  const json number = static_cast<std::int64_t>(it - names.begin());
  return visit_scalar(param.type.scalar,
                      [&](auto tag) { return store_scalar<typename decltype(tag)::type>(number, out); })
      .empty();
}

// One argument's bytes; false after reporting a problem at `where`. (A condition argument is
// bound once the node is declared: see bind_json.)
bool bind_argument(CompactJson::Ref value, const KernelParam& param, const std::string& where, NodeBinder& binder,
                   unsigned char* out) {
  const ParamType& type = param.type;
  if (type.condition) {
    if (value.is_string()) return true;
    binder.problem(where, "wrong type: parameter " + quoted_name(param.name) +
                              " takes a condition, the name of a conditional node, found " +
                              (value.is_object() ? std::string("a buffer reference") : type_of(value)));
    return false;
  }
  if (value.is_string() && !param.enumerators.empty()) return bind_enumerator(std::string(value.get_string()), param, where, binder, out);
  if (value.is_string() || value.is_object()) {
    BufferRef ref;
    from_json(value, ref);
    if (!type.pointer) {
      binder.problem(where, "wrong type: parameter " + quoted_name(param.name) + " takes " + to_string(type) +
                                " by value, found buffer " + quoted_name(ref.buffer));
      return false;
    }
    // A buffer must hold the parameter's element type; an alloc's memory is untyped bytes.
    if (!binder.names_alloc(ref)) {
      const BufferSpec* b = binder.buffer(ref, where);
      if (b == nullptr) return false;
      if (b->type != type.scalar) {
        binder.problem(where, "wrong type: parameter " + quoted_name(param.name) + " takes " + to_string(type) +
                                  ", buffer " + quoted_name(b->name) + " holds " + std::string(to_string(b->type)));
        return false;
      }
    }
    void* ptr = binder.address(ref, 0, size_of(type.scalar), where);
    if (ptr == nullptr) return false;
    std::memcpy(out, &ptr, sizeof ptr);
    return true;
  }
  if (type.pointer) {
    binder.problem(where, "wrong type: parameter " + quoted_name(param.name) + " takes " + to_string(type) +
                              ", a buffer name, found a number");
    return false;
  }
  const std::string why =
      visit_scalar(type.scalar, [&](auto tag) { return store_scalar<typename decltype(tag)::type>(value, out); });
  if (!why.empty())
    binder.problem(where, "parameter " + quoted_name(param.name) + " (" + to_string(type) + "): " + why);
  return why.empty();
}

// A number as JSON writes it: integers stay integers.
json scalar_json(const ParamType& type, const void* bytes) {
  return visit_scalar(type.scalar, [&](auto tag) -> json {
    using T = typename decltype(tag)::type;
    T value;
    std::memcpy(&value, bytes, sizeof(T));
    if constexpr (std::is_integral_v<T>) {
      return value;
    } else {
      return to_double(value);
    }
  });
}


// A Condition argument as DOT shows it: the conditional node whose condition it is.
std::string condition_text(const Description& d, std::uint64_t word) {
  const std::uint32_t index = symbol::index_of(word);
  if (!symbol::is_symbol(word) || index >= d.symbols.size() || symbol::offset_of(word) != 0) {
    return "condition (of no node of this graph)";
  }
  return "condition of " + quoted_name(node_path(d, d.symbols[index]));
}

// "kernel 'scale.f32'" or "library call 'cublaslt.matmul.bf16'".
std::string entry_text(const KernelInfo& entry) {
  return (entry.is_call() ? "library call " : "kernel ") + quoted_name(entry.name);
}

}  // namespace

const KernelInfo* find_entry(std::string_view name, const char* member, NodeBinder& binder) {
  const KernelInfo* info = binder.find_kernel(name);
  if (info != nullptr) return info;
  const auto& files = binder.spec().kernel_files;
  const bool declared =
      std::any_of(files.begin(), files.end(), [&](const KernelFileSpec& f) { return f.name == name; });
  binder.problem(member, declared
                             ? "kernel " + quoted_name(name) +
                                   " is declared in kernel_files but was not loaded "
                                   "(load the file with flowdsl::load_kernel_files)"
                             : "unknown " + std::string(std::strcmp(member, "/call") == 0 ? "library call" : "kernel") +
                                   " " + quoted_name(name) + " (not registered)");
  return nullptr;
}

std::vector<CompactJson::Member> read_arguments(const std::optional<CompactJson::Ref>& args) {
  if (!args) return {};
  if (!args->is_object()) fail("/args", "expected an object of arguments by parameter name, found " + type_of(*args));
  std::vector<CompactJson::Member> unique = unique_members(*args);
  for (const CompactJson::Member item : unique) {
    const CompactJson::Ref v = item.value;
    within_made([&] { return pointer_to("/args", item.key); }, [&] {
      if (v.is_string() || v.is_object()) {
        BufferRef ref;
        from_json(v, ref);
      } else if (!v.is_number()) {
        fail("", "expected a number (scalar parameter) or a buffer name (pointer parameter), found " + type_of(v));
      }
    });
  }
  return unique;
}

void write_arguments(CompactJson::Builder& out, const std::vector<CompactJson::Member>& args) {
  out.key("args");
  out.start_object();
  for (const CompactJson::Member m : args) {
    out.key(m.key);
    out.value(m.value);
  }
  out.end_object();
}

bool bind_arguments(CompactJson::Ref args, const KernelInfo& entry, NodeBinder& binder, std::vector<BoundArgument>& values) {
  if (!args.is_object()) {
    binder.problem("/args", "expected an object of arguments by parameter name, found " + type_of(args));
    return false;
  }
  bool ok = true;
  values.reserve(args.size());
  for (const CompactJson::Member item : args.members()) {
    const std::string where = pointer_to("/args", item.key);
    const std::size_t index = entry.index_of(item.key);
    if (index == entry.params.size()) {
      binder.problem(where, "unknown parameter " + quoted_name(std::string(item.key)) + " of " + entry_text(entry) +
                                " (parameters: " + list_names(entry.params) + ")");
      ok = false;
      continue;
    }
    BoundArgument value{index, {}};
    if (bind_argument(item.value, entry.params[index], where, binder, value.bytes)) {
      values.push_back(value);
    } else {
      ok = false;
    }
  }
  // Each argument named a distinct parameter: as many as there are parameters means none is missing.
  for (const KernelParam& p : entry.params) {
    if (values.size() == entry.params.size()) break;
    if (!args.contains(p.name)) {
      binder.problem(pointer_to("/args", p.name), "missing argument for parameter " + quoted_name(p.name) + " (" +
                                                  to_string(p.type) + ") of " + entry_text(entry));
      ok = false;
    }
  }
  return ok;
}

json describe_arguments(const ArgumentPack& pack, const KernelInfo& entry, NodeDescriber& describer, bool& described) {
  json args = json::object();
  described = entry.params.size() == pack.size();
  if (!described) {
    describer.problem("/args", "registered " + entry_text(entry) + " takes " + std::to_string(entry.params.size()) +
                                   " parameters, the node has " + std::to_string(pack.size()) + " arguments");
    return args;
  }
  for (std::size_t i = 0; i < pack.size(); ++i) {
    const KernelParam& p = entry.params[i];
    const std::string where = pointer_to("/args", p.name);
    if (!pack.bound(i)) continue;  // the reader reports it missing, as validation would
    if (pack.slot_size(i) != p.type.size()) {
      describer.problem(where, "argument of " + std::to_string(pack.slot_size(i)) + " bytes for parameter " +
                                   quoted_name(p.name) + " (" + to_string(p.type) + ")");
      continue;
    }
    if (p.type.pointer) {
      const void* ptr = nullptr;
      std::memcpy(&ptr, pack.data(i), sizeof ptr);
      args[p.name] = describer.locate(ptr, where);
      continue;
    }
    if (p.type.condition) {
      std::string target = describer.condition_name(pack.word(i), where);
      if (!target.empty()) args[p.name] = std::move(target);
      continue;
    }
    if (const std::string_view name = p.enumerator_at(pack.data(i)); !name.empty()) {
      args[p.name] = std::string(name);  // an enumerated value by its name
      continue;
    }
    json value = scalar_json(p.type, pack.data(i));
    if (value.is_number_float() && !std::isfinite(value.get<double>())) {
      describer.problem(where, "the value is not finite; JSON has no form for it");
      continue;
    }
    args[p.name] = std::move(value);
  }
  return args;
}

void dot_arguments(const ArgumentPack& args, const KernelInfo* info, DotLabel& label) {
  if (info != nullptr && info->params.size() != args.size()) info = nullptr;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string name = info ? info->params[i].name : "#" + std::to_string(i);
    if (!args.bound(i)) {
      label.lines.push_back(name + " = (unset)");
    } else if (args.kind(i) == SlotKind::condition) {
      label.lines.push_back(name + " = " + condition_text(label.description, args.word(i)));
    } else if (info && info->params[i].type.size() == args.slot_size(i)) {
      const std::string_view value = info->params[i].enumerator_at(args.data(i));
      label.lines.push_back(name + " = " +
                            (value.empty() ? value_text(info->params[i].type, args.data(i), label.addresses) : std::string(value)));
    } else {
      label.lines.push_back(name + " = " + hex_bytes(args.data(i), args.slot_size(i)));
    }
  }
}

}  // namespace flowdsl::io
