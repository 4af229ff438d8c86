// SPDX-License-Identifier: Apache-2.0
// The fusion pass, choosing runs: which kernel nodes may fuse and what each reads and writes.
#include <cstring>
#include <limits>

#include "fusion_parts.hpp"

namespace flowdsl::lowering::fusion_parts {
namespace {

// Functions an element function may call besides its parameters: CUDA's float math.
constexpr std::string_view known_functions[] = {
    "fmaf",  "fminf", "fmaxf",  "fabsf",  "expf",  "exp2f", "logf",  "log2f",     "sqrtf", "rsqrtf", "tanhf",
    "erff",  "sinf",  "cosf",   "powf",   "floorf", "ceilf", "truncf", "rintf",   "roundf", "copysignf",
    "__expf", "__fdividef", "__logf", "float", "int",
    "activate"};  // activate(act, x): the built-in activations (Activation), as the output's type computes them

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

bool is_integer(ScalarType t) {
  return t == ScalarType::i32 || t == ScalarType::i64 || t == ScalarType::u32 || t == ScalarType::u64;
}

std::int64_t integer_argument(const ArgumentPack& args, std::size_t i, ScalarType t) {
  switch (t) {
    case ScalarType::i32: { std::int32_t v; std::memcpy(&v, args.data(i), sizeof v); return v; }
    case ScalarType::u32: { std::uint32_t v; std::memcpy(&v, args.data(i), sizeof v); return v; }
    case ScalarType::u64: {
      std::uint64_t v;
      std::memcpy(&v, args.data(i), sizeof v);
      return v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ? -1 : static_cast<std::int64_t>(v);
    }
    default: { std::int64_t v; std::memcpy(&v, args.data(i), sizeof v); return v; }
  }
}

}  // namespace

const char* scalar_c_type(ScalarType t) {
  switch (t) {
    case ScalarType::f32: return "float";
    case ScalarType::i32: return "int";
    case ScalarType::i64: return "long long";
    case ScalarType::u32: return "unsigned";
    case ScalarType::u64: return "unsigned long long";
    default: return nullptr;
  }
}

std::string as_member(const Description& d, NodeId id, KernelInfos& kernels, Member& out) {
  const LaunchFields* op = launch_fields(d.nodes[id].op);
  if (op == nullptr) return std::string(not_a_kernel);
  const KernelInfo* info = registered_entry(op->info, op->function, op->args, kernels);
  if (info == nullptr) {
    return "its kernel is not registered (the pass reads registered element functions: "
           "register_builtins(KernelRegistry::global()) registers the built-in ones)";
  }
  if (info->element.empty()) return "kernel '" + info->name + "' has no element function";
  if (op->derived) return "it takes derived parameters";
  if (op->launch.cluster.volume() != 1) return "it runs in thread-block clusters";
  Member m;
  m.id = id;
  m.op = op;
  m.info = info;
  const std::size_t count = info->params.size();
  std::size_t outputs = 0;
  for (std::size_t p = 0; p < count; ++p) {
    const KernelParam& param = info->params[p];
    if (!op->args.bound(p)) return "argument '" + param.name + "' is not set";
    if (param.type.condition) return "it takes a Condition";
    if (param.type.pointer) {
      if (!is_element_type(param.type.scalar)) {
        return "pointer '" + param.name + "' is to " + std::string(to_string(param.type.scalar)) +
               " (fused kernels move f32, f16 and bf16)";
      }
      if (!param.type.is_const) {
        ++outputs;
        m.output = p;
      }
    } else if (scalar_c_type(param.type.scalar) == nullptr) {
      return "parameter '" + param.name + "' is " + std::string(to_string(param.type.scalar)) +
             " (fused kernels take f32 and 32- or 64-bit integers)";
    }
  }
  if (outputs != 1) return "it does not write exactly one pointer";

  // The element count: the output's extent, an expression of integer parameters.
  m.extent = std::string(trim(info->params[m.output].extent));
  std::string bad;
  for_each_token(
      m.extent,
      [&](std::string_view name) {
        const std::size_t p = info->index_of(name);
        if (p == count || info->params[p].type.pointer || !is_integer(info->params[p].type.scalar)) {
          bad = std::string(name);
        } else if (std::find(m.extent_params.begin(), m.extent_params.end(), p) == m.extent_params.end()) {
          m.extent_params.push_back(p);
        }
      },
      [&](std::string_view other) {
        for (char c : other) {
          if (std::string_view("0123456789 +-*/()").find(c) == std::string_view::npos) bad = std::string(1, c);
        }
      });
  if (m.extent.empty() || !bad.empty() || m.extent_params.empty()) {
    return "its output's extent '" + m.extent + "' is not an expression of its integer parameters";
  }
  for (std::size_t p : m.extent_params) {
    if (integer_argument(op->args, p, info->params[p].type.scalar) < 0) return "its count '" + info->params[p].name + "' is negative";
  }
  const Extent::Value elements = info->extents[m.output].evaluate(op->args, op->launch);
  if (elements.kind != Extent::Value::Kind::known ||
      elements.elements > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max() / 16)) {
    return "its element count is not known or too large";
  }
  m.n = static_cast<std::int64_t>(elements.elements);

  // The parameters the element function names; pointers followed by '[' are indexed.
  std::string unknown;
  m.gathered.assign(count, false);
  const std::string& element = info->element;
  std::size_t at = 0;
  for_each_token(
      element,
      [&](std::string_view name) {
        const std::size_t p = info->index_of(name);
        const std::size_t after = static_cast<std::size_t>(name.data() - element.data()) + name.size();
        at = element.find_first_not_of(' ', after);
        if (p < count) {
          if (info->params[p].type.pointer && at != std::string::npos && element[at] == '[') m.gathered[p] = true;
        } else if (name != "i" && std::find(std::begin(known_functions), std::end(known_functions), name) ==
                                      std::end(known_functions)) {
          unknown = std::string(name);
        }
      },
      [](std::string_view) {});
  if (!unknown.empty()) return "the element function of '" + info->name + "' names '" + unknown + "', no parameter of it";

  // What each pointer touches: the output's count of elements, or, indexed, its own extent.
  m.span.assign(count, 0);
  for (std::size_t p = 0; p < count; ++p) {
    if (!m.pointer(p)) continue;
    const KernelParam& param = info->params[p];
    if (m.gathered[p]) {
      if (p == m.output) return "its element function indexes its output '" + param.name + "'";
      const Extent::Value v = info->extents[p].evaluate(op->args, op->launch);
      if (v.kind != Extent::Value::Kind::known || v.elements > std::numeric_limits<std::uint64_t>::max() / 16) {
        return "the extent of its indexed pointer '" + param.name + "' is not known";
      }
      m.span[p] = v.elements * size_of(param.type.scalar);
    } else {
      if (trim(param.extent) != m.extent) {
        return "its pointer '" + param.name + "' has extent '" + std::string(trim(param.extent)) + "', not the output's '" +
               m.extent + "', and its element function does not index it";
      }
      m.span[p] = static_cast<std::uint64_t>(m.n) * size_of(param.type.scalar);
    }
  }
  // Its own operands must meet element by element, as the group's will; indexed ones must miss
  // what it writes.
  for (std::size_t a = 0; a < count; ++a) {
    for (std::size_t b = a + 1; b < count; ++b) {
      if (!m.pointer(a) || !m.pointer(b) || m.span[a] == 0 || m.span[b] == 0) continue;
      const std::uint64_t wa = m.word(a), wb = m.word(b);
      if (!(wa < wb + m.span[b] && wb < wa + m.span[a])) continue;
      const bool indexed = m.gathered[a] || m.gathered[b];
      const bool writes = a == m.output || b == m.output;
      if (indexed ? writes : !(wa == wb && m.type(a) == m.type(b))) {
        return "its pointers '" + info->params[a].name + "' and '" + info->params[b].name + "' overlap" +
               (indexed ? std::string() : std::string(" at another offset"));
      }
    }
  }
  out = std::move(m);
  return {};
}

std::uint64_t access_end(const Access& a, BufferIndex& buffers) {
  const auto begin = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(a.ptr));
  if (a.bytes != 0) return begin > unbounded - a.bytes ? unbounded : begin + a.bytes;
  const NamedBuffer* b = buffers.find(static_cast<std::uintptr_t>(begin));
  return b == nullptr ? unbounded : static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(b->ptr)) + b->bytes;
}

std::vector<std::int32_t> wiring_pattern(const std::vector<Member>& members) {
  std::vector<std::int32_t> pattern;
  std::vector<std::uint64_t> words;
  for (const Member& m : members) {
    for (std::size_t p = 0; p < m.info->params.size(); ++p) {
      if (!m.pointer(p)) continue;
      const auto same = std::find(words.begin(), words.end(), m.word(p));
      pattern.push_back(same == words.end() ? -1 : static_cast<std::int32_t>(same - words.begin()));
      words.push_back(m.word(p));
    }
  }
  return pattern;
}

}  // namespace flowdsl::lowering::fusion_parts
