// SPDX-License-Identifier: Apache-2.0
// The fusion pass: finds runs of element-wise kernels in a plan, generates the kernel of each
// run, and checks on parameter changes that a plan's groups still stand.
#include "fusion.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <string_view>
#include <variant>

#include "extent_checks.hpp"
#include "flowdsl/kind_traits.hpp"
#include "hasher.hpp"
#include "lowering_facets.hpp"

namespace flowdsl::lowering {
namespace {

constexpr std::size_t max_members = 64;  // one kernel's parameters stay small, its source short
constexpr std::uint32_t fused_block = 256;
constexpr std::uint32_t fused_unroll = 4;  // 16-byte vectors of each operand in flight a thread
constexpr std::uint64_t unbounded = std::numeric_limits<std::uint64_t>::max();

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

bool is_identifier_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_identifier_char(char c) { return is_identifier_start(c) || (c >= '0' && c <= '9'); }

// Calls `identifier(name)` for each identifier of `text` (not those inside numbers: 1e5f) and
// `other(text)` for what lies between them; the two together give back `text`.
template <class Identifier, class Other>
void for_each_token(std::string_view text, Identifier&& identifier, Other&& other) {
  std::size_t i = 0;
  while (i < text.size()) {
    if (is_identifier_start(text[i]) && (i == 0 || !is_identifier_char(text[i - 1]))) {
      std::size_t end = i + 1;
      while (end < text.size() && is_identifier_char(text[end])) ++end;
      identifier(text.substr(i, end - i));
      i = end;
    } else {
      std::size_t end = i + 1;
      while (end < text.size() && !(is_identifier_start(text[end]) && !is_identifier_char(text[end - 1]))) ++end;
      other(text.substr(i, end - i));
      i = end;
    }
  }
}

bool is_element_type(ScalarType t) { return t == ScalarType::f32 || t == ScalarType::f16 || t == ScalarType::bf16; }

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
const char* element_c_type(ScalarType t) { return t == ScalarType::f32 ? "float" : "unsigned short"; }
const char* conversion_of(ScalarType t) {
  return t == ScalarType::f32 ? "f32" : t == ScalarType::f16 ? "f16" : "bf16";
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

// A kernel node the pass may fuse, with what it needs of its registered entry.
struct Member {
  NodeId id = no_node;
  const LaunchFields* op = nullptr;  // the kernel's launch and arguments
  const KernelInfo* info = nullptr;
  std::size_t output = 0;                  // the one non-const pointer
  std::string extent;                      // the output's extent: the element count
  std::vector<std::size_t> extent_params;  // the integer parameters it names, first use first
  std::int64_t n = 0;
  std::vector<bool> gathered;      // per parameter: a pointer the element function indexes (p[...])
  std::vector<std::uint64_t> span; // per parameter: bytes a pointer touches (0 for scalars)

  std::uint64_t word(std::size_t p) const { return op->args.word(p); }
  ScalarType type(std::size_t p) const { return info->params[p].type.scalar; }
  std::uint64_t bytes(std::size_t p) const { return span[p]; }
  bool pointer(std::size_t p) const { return info->params[p].type.pointer; }
};

constexpr std::string_view not_a_kernel = "-";

// Why node `id` cannot join a group ("-": not a kernel, nothing to say), or "" with `out` set.
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

// Where the members of a run so far read and write: a new member joins when its count is theirs
// and each of its pointers equals one of their ranges (same element type) or misses them all.
class RunBuilder {
 public:
  bool accepts(const Description& d, const Member& m, std::string& why) const {
    if (members_.empty()) return true;
    if (members_.size() == max_members) {
      why = "the run before it holds " + std::to_string(max_members) + " kernels, the most one fused kernel takes";
      return false;
    }
    if (m.n != members_.front().n) {
      why = "its element count " + std::to_string(m.n) + " differs from the " + std::to_string(members_.front().n) +
            " of " + quoted_name(node_path(d, members_.back().id));
      return false;
    }
    for (std::size_t p = 0; p < m.info->params.size(); ++p) {
      if (!m.pointer(p) || m.bytes(p) == 0) continue;
      const std::uint64_t begin = m.word(p), end = begin + m.bytes(p);
      const bool writes = p == m.output;
      for (const Range& r : ranges_) {
        if (!(begin < r.end && r.begin < end)) continue;
        // Indexed operands are read by any thread: nothing in the group may write them. Others
        // meet element by element: the same pointer and type, or apart.
        const bool clash = (m.gathered[p] || r.gathered) ? (writes || r.written)
                                                         : !(begin == r.begin && m.type(p) == r.type);
        if (clash) {
          why = "its argument '" + m.info->params[p].name + "' overlaps " +
                (m.gathered[p] || r.gathered ? std::string("memory indexed or written by ")
                                             : std::string("an operand at another offset or of another type in ")) +
                quoted_name(node_path(d, r.owner));
          return false;
        }
      }
    }
    return true;
  }
  void add(Member m) {
    for (std::size_t p = 0; p < m.info->params.size(); ++p) {
      if (m.pointer(p) && m.bytes(p) != 0) {
        ranges_.push_back(Range{m.word(p), m.word(p) + m.bytes(p), m.type(p), m.id, p == m.output, m.gathered[p]});
      }
    }
    members_.push_back(std::move(m));
  }
  std::vector<Member>& members() { return members_; }
  void clear() {
    members_.clear();
    ranges_.clear();
  }

 private:
  struct Range {
    std::uint64_t begin, end;
    ScalarType type;
    NodeId owner;
    bool written;   // the owner's output
    bool gathered;  // indexed by the owner's element function
  };
  std::vector<Member> members_;
  std::vector<Range> ranges_;
};

// Where access `a` ends: at its extent, or, unknown, at the end of the named buffer or graph
// memory it starts in (as the hazard check takes it), else at the end of memory.
std::uint64_t access_end(const Access& a, BufferIndex& buffers) {
  const auto begin = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(a.ptr));
  if (a.bytes != 0) return begin > unbounded - a.bytes ? unbounded : begin + a.bytes;
  const NamedBuffer* b = buffers.find(static_cast<std::uintptr_t>(begin));
  return b == nullptr ? unbounded : static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(b->ptr)) + b->bytes;
}

// Every node's accesses, for the question whether a node outside a group touches an output the
// group would keep in registers; and whether some node may touch any memory.
class Touches {
 public:
  Touches(const Description& d, KernelInfos& kernels) {
    BufferIndex buffers(d);
    std::vector<Access> accesses;
    for (NodeId id = 0; id < d.nodes.size(); ++id) {
      const Node& node = d.nodes[id];
      if (unknown_.empty()) unknown_ = touches_any(d, id, kernels);
      accesses.assign(node.accesses.begin(), node.accesses.end());
      std::visit([&](const auto& op) { lowering_of(op).derived_accesses(op, kernels, accesses); }, node.op);
      for (const Access& a : accesses) {
        const auto begin = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(a.ptr));
        const std::uint64_t end = access_end(a, buffers);
        if (end == unbounded) {
          open_.push_back(Span{begin, end, id});
        } else {
          spans_.push_back(Span{begin, end, id});
          longest_ = std::max(longest_, end - begin);
        }
      }
    }
    // Buffers read after launches: touched from outside every group.
    for (const NamedBuffer& b : d.buffers) {
      if (!b.output) continue;
      const auto begin = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(b.ptr));
      spans_.push_back(Span{begin, begin + b.bytes, no_node});
      longest_ = std::max<std::uint64_t>(longest_, b.bytes);
    }
    std::sort(spans_.begin(), spans_.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  }
  /// Why every output must be stored (a node that may touch any memory), or "".
  const std::string& unknown() const { return unknown_; }
  /// Whether a node other than `members` touches [begin, end).
  bool touched_by_others(std::uint64_t begin, std::uint64_t end, const std::vector<Member>& members) const {
    auto outside = [&](NodeId id) {
      return std::none_of(members.begin(), members.end(), [&](const Member& m) { return m.id == id; });
    };
    for (const Span& s : open_) {
      if (s.begin < end && outside(s.node)) return true;
    }
    const std::uint64_t from = begin > longest_ ? begin - longest_ : 0;
    auto it = std::lower_bound(spans_.begin(), spans_.end(), from, [](const Span& s, std::uint64_t v) { return s.begin < v; });
    for (; it != spans_.end() && it->begin < end; ++it) {
      if (it->end > begin && outside(it->node)) return true;
    }
    return false;
  }

 private:
  static std::string touches_any(const Description& d, NodeId id, KernelInfos& kernels) {
    const Operation& op = d.nodes[id].op;
    std::string why;
    if (reaches_any_memory(op)) why = "may read any memory";
    if (const std::optional<RegisteredCall> call = registered_call(op)) {
      const KernelInfo* info = registered_entry(call->info, call->function, *call->args, kernels);
      if (info == nullptr || !info->checked()) why = std::string(call->action) + " whose pointers' extents are not declared";
    }
    return why.empty() ? why : "node " + quoted_name(node_path(d, id)) + " " + why;
  }
  struct Span {
    std::uint64_t begin, end;
    NodeId node;
  };
  std::vector<Span> spans_;
  std::vector<Span> open_;  // unknown extents: to the end of memory
  std::uint64_t longest_ = 0;
  std::string unknown_;
};

// FusedGroup::pattern of `members`.
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

std::uint32_t blocks_for(std::int64_t work, std::int64_t per_block) {
  const std::int64_t blocks = std::max<std::int64_t>(1, (work + per_block - 1) / per_block);
  return static_cast<std::uint32_t>(std::min<std::int64_t>(blocks, 0x7fffffff));
}

// The helpers every fused kernel starts with: conversions as cuda_fp16.h / cuda_bf16.h make them
// on sm_80 and later (the same instructions, so the same roundings), 16-byte vectors.
constexpr const char* prelude = R"(typedef unsigned short fd_u16;
__device__ __forceinline__ float fd_load_f32(float x) { return x; }
__device__ __forceinline__ float fd_store_f32(float x) { return x; }
__device__ __forceinline__ float fd_load_f16(fd_u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ fd_u16 fd_store_f16(float f) { fd_u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float fd_load_bf16(fd_u16 h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ fd_u16 fd_store_bf16(float f) { fd_u16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float fd_round_f32(float x) { return x; }
__device__ __forceinline__ float fd_round_f16(float x) { return fd_load_f16(fd_store_f16(x)); }
__device__ __forceinline__ float fd_round_bf16(float x) { return fd_load_bf16(fd_store_bf16(x)); }
template <class T, int N> struct alignas(sizeof(T) * N) fd_vec { T v[N]; };
struct fd_gather_f32 { const float* p; __device__ float operator[](long long i) const { return p[i]; } };
struct fd_gather_f16 { const fd_u16* p; __device__ float operator[](long long i) const { return fd_load_f16(p[i]); } };
struct fd_gather_bf16 { const fd_u16* p; __device__ float operator[](long long i) const { return fd_load_bf16(p[i]); } };
__device__ __forceinline__ float fd_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float fd_activate_f32(int act, float x) {
  switch (act) {
    case 1: return fmaxf(x, 0.0f);
    case 2: return fd_gelu(x);
    case 3: return x / (1.0f + expf(-x));
    default: return x;
  }
}
__device__ __forceinline__ float fd_activate_f16(int act, float x) {
  return act == 3 ? __fdividef(x, 1.0f + __expf(-x)) : fd_activate_f32(act, x);
}
__device__ __forceinline__ float fd_activate_bf16(int act, float x) { return fd_activate_f16(act, x); }
)";

// The group of `members` (a run RunBuilder accepted): its kernel's source, parameters and stored
// outputs. `touches`: the graph's accesses, to decide which outputs stay in registers;
// `stores_all`: why none may, or empty.
FusedGroup generate(const std::vector<Member>& members, const Touches& touches, const std::string& stores_all) {
  FusedGroup g;
  const std::size_t count = members.size();
  std::size_t widest = 1;
  for (const Member& m : members) {
    g.members.push_back(m.id);
    for (std::size_t p = 0; p < m.info->params.size(); ++p) {
      if (m.pointer(p)) widest = std::max(widest, size_of(m.type(p)));
    }
  }
  const std::uint32_t V = static_cast<std::uint32_t>(16 / widest);
  g.vector_width = V;

  // Each member's operands: a load of the graph's memory, or the value an earlier member made.
  struct Load {
    std::uint64_t word;
    ScalarType type;
    FusedArgument from;
  };
  std::vector<Load> loads;
  std::vector<Load> gathers;  // indexed operands
  std::vector<std::string> value_of(count);  // per member: its result's variable
  std::vector<bool> overwritten(count, false), read_later(count, false);
  std::vector<std::pair<std::uint64_t, std::size_t>> latest;  // pointer word -> member that wrote it last
  std::vector<std::string> bodies(count);
  auto find_latest = [&](std::uint64_t word) {
    return std::find_if(latest.begin(), latest.end(), [&](const auto& e) { return e.first == word; });
  };
  std::vector<FusedArgument> scalars;
  std::string scalar_params;
  for (std::size_t k = 0; k < count; ++k) {
    const Member& m = members[k];
    std::string expression;
    for_each_token(
        m.info->element,
        [&](std::string_view name) {
          const std::size_t p = m.info->index_of(name);
          if (p == m.info->params.size()) {
            if (name == "i") {
              expression += "fd_i";
            } else if (name == "activate") {
              expression += std::string("fd_activate_") + conversion_of(m.type(m.output));
            } else {
              expression += name;
            }
            return;
          }
          if (!m.pointer(p)) {
            const std::string var = "fd_s" + std::to_string(k) + "_" + std::to_string(p);
            if (std::find(scalars.begin(), scalars.end(), FusedArgument{std::uint32_t(k), std::uint32_t(p)}) == scalars.end()) {
              scalars.push_back(FusedArgument{static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(p)});
              scalar_params += std::string(", ") + scalar_c_type(m.type(p)) + " " + var;
            }
            expression += var;
            return;
          }
          const std::uint64_t word = m.word(p);
          if (m.gathered[p]) {  // read through an accessor, at the index the function gives
            auto gather = std::find_if(gathers.begin(), gathers.end(),
                                       [&](const Load& l) { return l.word == word && l.type == m.type(p); });
            if (gather == gathers.end()) {
              gathers.push_back(Load{word, m.type(p), FusedArgument{static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(p)}});
              gather = gathers.end() - 1;
            }
            expression += "fd_g" + std::to_string(gather - gathers.begin());
            return;
          }
          const auto wrote = find_latest(word);
          if (wrote != latest.end()) {
            read_later[wrote->second] = true;
            expression += value_of[wrote->second];
            return;
          }
          auto load = std::find_if(loads.begin(), loads.end(), [&](const Load& l) { return l.word == word; });
          if (load == loads.end()) {
            loads.push_back(Load{word, m.type(p), FusedArgument{static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(p)}});
            load = loads.end() - 1;
          }
          expression += "fd_x" + std::to_string(load - loads.begin());
        },
        [&](std::string_view other) { expression += other; });
    value_of[k] = "fd_r" + std::to_string(k);
    bodies[k] = "const float " + value_of[k] + " = fd_round_" + conversion_of(m.type(m.output)) + "(" + expression + ");";
    const std::uint64_t out = m.word(m.output);
    const auto wrote = find_latest(out);
    if (wrote != latest.end()) {
      overwritten[wrote->second] = true;
      wrote->second = k;
    } else {
      latest.emplace_back(out, k);
    }
  }

  // Which outputs are stored.
  g.stored.assign(count, true);
  for (std::size_t k = 0; k < count; ++k) {
    const Member& m = members[k];
    bool stored = !overwritten[k];
    // An output an earlier member loads (the value of the previous launch) is stored whatever
    // reads it later in the group.
    const bool loaded = std::any_of(loads.begin(), loads.end(), [&](const Load& l) { return l.word == m.word(m.output); });
    if (stored && read_later[k] && !loaded) {
      const std::uint64_t begin = m.word(m.output);
      stored = !stores_all.empty() || touches.touched_by_others(begin, begin + m.bytes(m.output), members);
    }
    g.stored[k] = stored;
    if (!stored && !overwritten[k]) {
      g.elided.push_back(Access{reinterpret_cast<const void*>(static_cast<std::uintptr_t>(m.word(m.output))),
                                static_cast<std::size_t>(m.bytes(m.output)), AccessMode::write});
    }
  }

  // Parameters: the count, the scalars, the loaded pointers, the stored pointers.
  // The count: the first member's output extent over its own parameters.
  const Member& first = members.front();
  std::string params;
  std::string count_expression;
  for (std::size_t j = 0; j < first.extent_params.size(); ++j) {
    const std::size_t p = first.extent_params[j];
    g.arguments.push_back(FusedArgument{0, static_cast<std::uint32_t>(p)});
    params += std::string(j == 0 ? "" : ", ") + scalar_c_type(first.type(p)) + " fd_c" + std::to_string(j);
  }
  for_each_token(
      first.extent,
      [&](std::string_view name) {
        const std::size_t p = first.info->index_of(name);
        const auto j = std::find(first.extent_params.begin(), first.extent_params.end(), p) - first.extent_params.begin();
        count_expression += "((long long)fd_c" + std::to_string(j) + ")";
      },
      [&](std::string_view other) { count_expression += other; });
  params += scalar_params;
  g.arguments.insert(g.arguments.end(), scalars.begin(), scalars.end());
  for (std::size_t e = 0; e < gathers.size(); ++e) {
    g.arguments.push_back(gathers[e].from);
    params += std::string(", const ") + element_c_type(gathers[e].type) + "* fd_gp" + std::to_string(e);
  }
  for (std::size_t e = 0; e < loads.size(); ++e) {
    g.arguments.push_back(loads[e].from);
    params += std::string(", const ") + element_c_type(loads[e].type) + "* fd_in" + std::to_string(e);
  }
  std::vector<std::size_t> stores;  // members whose output is stored
  for (std::size_t k = 0; k < count; ++k) {
    if (!g.stored[k]) continue;
    const Member& m = members[k];
    g.arguments.push_back(FusedArgument{static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(m.output)});
    params += std::string(", ") + element_c_type(m.type(m.output)) + "* fd_out" + std::to_string(stores.size());
    stores.push_back(k);
  }

  // The source: a vector path (every pointer aligned to its V-element vector, n a multiple of V)
  // that loads U vectors of every operand, computes, then stores; else an element-wise loop.
  const std::string Vs = std::to_string(V), Us = std::to_string(fused_unroll);
  std::string body;  // per element, after fd_i and the loads' fd_x
  for (const std::string& b : bodies) body += "        " + b + "\n";
  auto vec_type = [&](ScalarType t) { return std::string("fd_vec<") + element_c_type(t) + ", " + Vs + ">"; };
  std::string s = "// flowdsl fused kernel:";
  for (const Member& m : members) s += " " + m.info->name;
  s += "\n";
  s += prelude;
  s += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(fused_block) + ") flowdsl_fused(" + params +
       ") {\n";
  s += "  asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n";
  s += "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n";
  s += "  const long long fd_n = " + count_expression + ";\n";
  for (std::size_t e = 0; e < gathers.size(); ++e) {
    s += std::string("  const fd_gather_") + conversion_of(gathers[e].type) + " fd_g" + std::to_string(e) + "{fd_gp" +
         std::to_string(e) + "};\n";
  }
  s += "  const long long fd_stride = (long long)gridDim.x * blockDim.x;\n";
  std::string aligned = "fd_n % " + Vs + " == 0";
  for (std::size_t e = 0; e < loads.size(); ++e) {
    aligned += " && (unsigned long long)fd_in" + std::to_string(e) + " % " + std::to_string(V * size_of(loads[e].type)) + " == 0";
  }
  for (std::size_t o = 0; o < stores.size(); ++o) {
    const Member& m = members[stores[o]];
    aligned += " && (unsigned long long)fd_out" + std::to_string(o) + " % " + std::to_string(V * size_of(m.type(m.output))) +
               " == 0";
  }
  s += "  if (" + aligned + ") {\n";
  s += "    const long long fd_vectors = fd_n / " + Vs + ";\n";
  s += "    for (long long fd_base = (long long)blockIdx.x * blockDim.x * " + Us +
       " + threadIdx.x; fd_base < fd_vectors; fd_base += fd_stride * " + Us + ") {\n";
  for (std::size_t e = 0; e < loads.size(); ++e) s += "      " + vec_type(loads[e].type) + " fd_l" + std::to_string(e) + "[" + Us + "];\n";
  s += "#pragma unroll\n      for (int u = 0; u < " + Us + "; ++u) {\n";
  s += "        const long long v = fd_base + (long long)u * blockDim.x;\n        if (v < fd_vectors) {\n";
  for (std::size_t e = 0; e < loads.size(); ++e) {
    s += "          fd_l" + std::to_string(e) + "[u] = ((const " + vec_type(loads[e].type) + "*)fd_in" + std::to_string(e) + ")[v];\n";
  }
  s += "        }\n      }\n";
  for (std::size_t o = 0; o < stores.size(); ++o) {
    const Member& m = members[stores[o]];
    s += "      " + vec_type(m.type(m.output)) + " fd_o" + std::to_string(o) + "[" + Us + "];\n";
  }
  s += "#pragma unroll\n      for (int u = 0; u < " + Us + "; ++u) {\n#pragma unroll\n        for (int j = 0; j < " + Vs +
       "; ++j) {\n";
  s += "        const long long fd_i = (fd_base + (long long)u * blockDim.x) * " + Vs + " + j;\n";
  s += "        (void)fd_i;\n";
  for (std::size_t e = 0; e < loads.size(); ++e) {
    s += "        const float fd_x" + std::to_string(e) + " = fd_load_" + conversion_of(loads[e].type) + "(fd_l" +
         std::to_string(e) + "[u].v[j]);\n";
  }
  s += body;
  for (std::size_t o = 0; o < stores.size(); ++o) {
    const Member& m = members[stores[o]];
    s += "        fd_o" + std::to_string(o) + "[u].v[j] = fd_store_" + conversion_of(m.type(m.output)) + "(" +
         value_of[stores[o]] + ");\n";
  }
  s += "        }\n      }\n";
  s += "#pragma unroll\n      for (int u = 0; u < " + Us + "; ++u) {\n";
  s += "        const long long v = fd_base + (long long)u * blockDim.x;\n        if (v < fd_vectors) {\n";
  for (std::size_t o = 0; o < stores.size(); ++o) {
    const Member& m = members[stores[o]];
    s += "          ((" + vec_type(m.type(m.output)) + "*)fd_out" + std::to_string(o) + ")[v] = fd_o" + std::to_string(o) +
         "[u];\n";
  }
  s += "        }\n      }\n    }\n    return;\n  }\n";
  s += "  for (long long fd_i = (long long)blockIdx.x * blockDim.x + threadIdx.x; fd_i < fd_n; fd_i += fd_stride) {\n";
  for (std::size_t e = 0; e < loads.size(); ++e) {
    s += "        const float fd_x" + std::to_string(e) + " = fd_load_" + conversion_of(loads[e].type) + "(fd_in" +
         std::to_string(e) + "[fd_i]);\n";
  }
  s += body;
  for (std::size_t o = 0; o < stores.size(); ++o) {
    const Member& m = members[stores[o]];
    s += "        fd_out" + std::to_string(o) + "[fd_i] = fd_store_" + conversion_of(m.type(m.output)) + "(" +
         value_of[stores[o]] + ");\n";
  }
  s += "  }\n}\n";
  g.source = std::move(s);
  g.pattern = wiring_pattern(members);
  g.launch.grid = Dim3(blocks_for(first.n, std::int64_t{fused_block} * V * fused_unroll));
  g.launch.block = Dim3(fused_block);
  return g;
}

// Walks the steps of one body, closing a run at each node that cannot join it.
class Finder {
 public:
  Finder(const Description& d, FusionPlan& out) : d_(d), out_(out) {}

  void walk(const std::vector<PlanStep>& steps) {
    for (const PlanStep& step : steps) {
      Member m;
      const std::string why_not = as_member(d_, step.node, kernels_, m);
      if (!why_not.empty()) {
        close();
        if (why_not != not_a_kernel) out_.notes.push_back(FusionNote{step.node, why_not});
        continue;
      }
      std::string why;
      if (!run_.accepts(d_, m, why)) {
        close();
        run_reason_ = why;
      }
      run_.add(std::move(m));
    }
    close();
  }

 private:
  void close() {
    std::vector<Member>& members = run_.members();
    if (members.size() >= 2) {
      if (!touches_) {
        touches_ = std::make_unique<Touches>(d_, kernels_);
        out_.stores_all = touches_->unknown();
      }
      out_.groups.push_back(generate(members, *touches_, out_.stores_all));
      for (const Member& m : members) out_.group_of.emplace(m.id, static_cast<std::uint32_t>(out_.groups.size() - 1));
    } else if (members.size() == 1) {
      out_.notes.push_back(FusionNote{
          members.front().id, run_reason_.empty() ? "no element-wise kernel next to it in its body's plan order" : run_reason_});
    }
    run_.clear();
    run_reason_.clear();
  }

  const Description& d_;
  FusionPlan& out_;
  KernelInfos kernels_;
  RunBuilder run_;
  std::string run_reason_;  // why the run's first member did not join the run before it
  std::unique_ptr<Touches> touches_;
};

}  // namespace

bool fusion_holds(const Description& d, const FusionPlan& fusion, const std::vector<NodeId>& changed) {
  KernelInfos kernels;
  BufferIndex buffers(d);
  std::vector<std::uint32_t> touched;
  bool any_elided = false;
  for (const FusedGroup& g : fusion.groups) any_elided = any_elided || !g.elided.empty();
  std::vector<Access> accesses;
  for (NodeId id : changed) {
    const auto member = fusion.group_of.find(id);
    const std::uint32_t own = member == fusion.group_of.end() ? ~0u : member->second;
    if (own != ~0u) touched.push_back(own);
    if (!any_elided) continue;
    const Node& node = d.nodes[id];
    accesses.assign(node.accesses.begin(), node.accesses.end());
    std::visit([&](const auto& op) { lowering_of(op).derived_accesses(op, kernels, accesses); }, node.op);
    for (std::uint32_t gi = 0; gi < fusion.groups.size(); ++gi) {
      if (gi == own) continue;
      for (const Access& kept : fusion.groups[gi].elided) {
        const auto begin = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(kept.ptr));
        for (const Access& a : accesses) {
          const auto from = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(a.ptr));
          const std::uint64_t to = access_end(a, buffers);
          if (from < begin + kept.bytes && begin < to) return false;
        }
      }
    }
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (std::uint32_t gi : touched) {
    const FusedGroup& before = fusion.groups[gi];
    RunBuilder run;
    for (NodeId id : before.members) {
      Member m;
      std::string why;
      if (!as_member(d, id, kernels, m).empty() || !run.accepts(d, m, why)) return false;
      run.add(std::move(m));
    }
    // The same pointers equal each other: the same kernel and arguments (generate reads the
    // pointers through this alone), the same outputs overwritten. Outputs kept in registers must
    // also be where they were, since other nodes were checked against those ranges.
    if (wiring_pattern(run.members()) != before.pattern) return false;
    std::size_t elided = 0;
    for (std::size_t k = 0; k < before.members.size(); ++k) {
      const Member& m = run.members()[k];
      const bool overwritten = std::any_of(run.members().begin() + static_cast<std::ptrdiff_t>(k) + 1, run.members().end(),
                                           [&](const Member& later) { return later.word(later.output) == m.word(m.output); });
      if (before.stored[k] || overwritten) continue;
      if (elided == before.elided.size() ||
          reinterpret_cast<std::uintptr_t>(before.elided[elided].ptr) != m.word(m.output) ||
          before.elided[elided].bytes != m.bytes(m.output)) {
        return false;
      }
      ++elided;
    }
    if (elided != before.elided.size()) return false;
  }
  return true;
}

std::uint64_t hash_fusion(std::uint64_t topology, const Description&, const Plan& plan, const FusionPlan& fusion) {
  Hasher h;
  h.add(topology);
  for (const FusedGroup& g : fusion.groups) {
    h.add(plan.position[g.members.front()]);
    h.add(g.members.size());
    h.add(std::hash<std::string>{}(g.source));
    std::uint64_t stored = 0;
    for (std::size_t k = 0; k < g.stored.size(); ++k) {
      if (g.stored[k]) stored |= std::uint64_t{1} << (k % 64);
    }
    h.add(stored);
  }
  return h.finish();
}

}  // namespace flowdsl::lowering

namespace flowdsl {

FusionPlan plan_fusion(const Description& d, const Plan& plan) {
  FusionPlan out;
  lowering::Finder finder(d, out);
  finder.walk(plan.steps);
  for (const std::vector<PlanStep>& body : plan.bodies) finder.walk(body);
  return out;
}

std::string describe_fusion(const Description& d, const FusionPlan& fusion) {
  std::size_t fused = 0;
  for (const FusedGroup& g : fusion.groups) fused += g.members.size();
  std::string text = "fusion: " + std::to_string(fusion.groups.size()) + (fusion.groups.size() == 1 ? " group" : " groups") +
                     " of " + std::to_string(fused) + " kernels\n";
  for (std::size_t i = 0; i < fusion.groups.size(); ++i) {
    const FusedGroup& g = fusion.groups[i];
    text += "  group " + std::to_string(i + 1) + ":";
    std::string kept;
    for (std::size_t k = 0; k < g.members.size(); ++k) {
      text += (k == 0 ? " " : " > ") + quoted_name(node_path(d, g.members[k]));
      if (!g.stored[k]) kept += (kept.empty() ? "" : ", ") + quoted_name(node_path(d, g.members[k]));
    }
    text += "; one kernel of " + std::to_string(g.arguments.size()) + " parameters";
    text += kept.empty() ? std::string("; every output stored") : "; kept in registers, not stored: " + kept;
    text += "\n";
  }
  for (const FusionNote& note : fusion.notes) {
    text += "  not fused: " + quoted_name(node_path(d, note.node)) + ": " + note.reason + "\n";
  }
  if (!fusion.stores_all.empty()) text += "  every output stored: " + fusion.stores_all + "\n";
  return text;
}

}  // namespace flowdsl
