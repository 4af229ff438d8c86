// DOT dumps: a rendering of the description (no plan needed), so that invalid graphs can be
// looked at too. It sits with lowering as another view of the description, not with the builder.
#include "flowdsl/dot.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <unordered_map>

namespace flowdsl {
namespace {

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

std::string dims(const Dim3& d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

std::string pointer_text(const void* p) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%p", p);
  return buffer;
}

template <class T>
T load(const void* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

std::string value_text(const ParamType& type, const void* bytes) {
  if (type.pointer) return pointer_text(load<const void*>(bytes));
  std::ostringstream out;
  switch (type.scalar) {
    case ScalarType::i8: out << int{load<std::int8_t>(bytes)}; break;
    case ScalarType::i16: out << load<std::int16_t>(bytes); break;
    case ScalarType::i32: out << load<std::int32_t>(bytes); break;
    case ScalarType::i64: out << load<std::int64_t>(bytes); break;
    case ScalarType::u8: out << unsigned{load<std::uint8_t>(bytes)}; break;
    case ScalarType::u16: out << load<std::uint16_t>(bytes); break;
    case ScalarType::u32: out << load<std::uint32_t>(bytes); break;
    case ScalarType::u64: out << load<std::uint64_t>(bytes); break;
    case ScalarType::f16: out << __half2float(load<__half>(bytes)); break;
    case ScalarType::bf16: out << __bfloat162float(load<__nv_bfloat16>(bytes)); break;
    case ScalarType::f32: out << load<float>(bytes); break;
    case ScalarType::f64: out << load<double>(bytes); break;
  }
  return out.str();
}

std::string hex_bytes(const void* bytes, std::size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string out = "0x";
  for (std::size_t i = size; i-- > 0;) {  // little-endian: most significant byte first
    const auto b = static_cast<const unsigned char*>(bytes)[i];
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

const KernelInfo* registered(const KernelOp& op, const KernelRegistry* registry) {
  if (registry == nullptr) return nullptr;
  for (const KernelInfo* info : registry->list()) {
    if (info->function == op.function && info->params.size() == op.args.size()) return info;
  }
  return nullptr;
}

struct Label {
  const DotOptions& options;
  std::vector<std::string>& lines;

  void operator()(const KernelOp& op) const {
    lines.push_back("kernel " + (op.kernel_name.empty() ? std::string("(unnamed)") : op.kernel_name));
    lines.push_back("grid " + dims(op.launch.grid) + " block " + dims(op.launch.block) +
                    (op.launch.shared_bytes ? " smem " + std::to_string(op.launch.shared_bytes) : ""));
    if (!options.show_arguments) return;
    const KernelInfo* info = registered(op, options.registry);
    for (std::size_t i = 0; i < op.args.size(); ++i) {
      const std::string name = info ? info->params[i].name : "#" + std::to_string(i);
      if (!op.args.bound(i)) {
        lines.push_back(name + " = (unset)");
      } else if (info && info->params[i].type.size() == op.args.slot_size(i)) {
        lines.push_back(name + " = " + value_text(info->params[i].type, op.args.data(i)));
      } else {
        lines.push_back(name + " = " + hex_bytes(op.args.data(i), op.args.slot_size(i)));
      }
    }
  }
  void operator()(const MemcpyOp& op) const {
    lines.push_back("memcpy " + std::to_string(op.bytes) + " bytes");
    if (options.show_arguments) lines.push_back(pointer_text(op.src) + " -> " + pointer_text(op.dst));
  }
  void operator()(const MemsetOp& op) const {
    lines.push_back("memset " + std::to_string(op.count) + " x " + std::to_string(op.element_size) + " bytes");
    if (options.show_arguments) lines.push_back(pointer_text(op.dst) + " = " + std::to_string(op.value));
  }
  void operator()(const EmptyOp&) const { lines.push_back("empty"); }
  void operator()(const HostOp& op) const {
    lines.push_back("host");
    if (options.show_arguments) lines.push_back("user data " + pointer_text(op.user_data));
  }
};

const char* colour(std::string_view kind) {
  if (kind == "kernel") return "lightblue";
  if (kind == "memcpy") return "palegreen";
  if (kind == "memset") return "khaki";
  if (kind == "host") return "lightsalmon";
  return "white";
}

}  // namespace

const char* to_string(LaunchKind kind) noexcept {
  switch (kind) {
    case LaunchKind::hit: return "hit";
    case LaunchKind::updated: return "updated";
    case LaunchKind::instantiated: return "instantiated";
    case LaunchKind::reinstantiated: return "reinstantiated";
  }
  return "?";
}

std::string to_dot(const Graph& graph, const DotOptions& options) {
  const Description& d = graph.description();
  std::string out = "digraph flowdsl {\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n";
  if (options.last_launch) {
    std::string title = std::string("last launch: ") + to_string(options.last_launch->kind);
    if (options.last_launch->kind == LaunchKind::updated) title += " (" + std::to_string(options.last_launch->nodes_updated) + " nodes)";
    out += "  labelloc=t;\n  label=" + quoted(title) + ";\n";
  }
  std::unordered_map<std::string_view, NodeId> by_name;
  for (NodeId id = 0; id < d.nodes.size(); ++id) {
    const Node& node = d.nodes[id];
    by_name.emplace(node.name, id);
    std::vector<std::string> lines{node.name};
    std::visit(Label{options, lines}, node.op);
    std::string label = "\"";
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i) label += "\\n";
      escape_into(label, lines[i]);
    }
    out += "  n" + std::to_string(id) + " [label=" + label + "\", fillcolor=" + colour(kind_name(node.op)) + "];\n";
  }
  std::unordered_map<std::string, std::string> missing;  // undeclared name -> DOT id
  const auto endpoint = [&](const NodeRef& ref) -> std::string {
    if (ref.id != no_node) return "n" + std::to_string(ref.id);
    if (const auto it = by_name.find(ref.name); it != by_name.end()) return "n" + std::to_string(it->second);
    auto [it, added] = missing.emplace(ref.name, "missing" + std::to_string(missing.size()));
    if (added) {
      out += "  " + it->second + " [label=" + quoted(ref.name + "\n(undeclared)") +
             ", style=dashed, color=red, fillcolor=white];\n";
    }
    return it->second;
  };
  for (const Edge& e : d.edges) {
    const std::string from = endpoint(e.from);
    const std::string to = endpoint(e.to);
    out += "  " + from + " -> " + to + ";\n";
  }
  return out + "}\n";
}

}  // namespace flowdsl
