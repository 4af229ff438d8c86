// SPDX-License-Identifier: Apache-2.0
// The fusion pass, generating CUDA source: the kernel of a run of element-wise kernels, its
// parameters and which outputs it stores.
#include <algorithm>
#include <string>

#include "fusion_parts.hpp"

namespace flowdsl::lowering::fusion_parts {
namespace {

const char* element_c_type(ScalarType t) { return t == ScalarType::f32 ? "float" : "unsigned short"; }
const char* conversion_of(ScalarType t) {
  return t == ScalarType::f32 ? "f32" : t == ScalarType::f16 ? "f16" : "bf16";
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

}  // namespace

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

}  // namespace flowdsl::lowering::fusion_parts
