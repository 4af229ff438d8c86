// SPDX-License-Identifier: Apache-2.0
// A Llama model on flowdsl graphs, shared by the LLM samples: its sizes (config.json), its bf16
// weights in one device allocation (from a Hugging Face checkpoint or random), the activations
// and paged KV cache a step works on, and a step's nodes (a decode step, a prefill chunk, or a
// mix of both), declared into a graph or into a decode loop's body.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.cuh"
#include "flowdsl/cublaslt.hpp"
#include "flowdsl/kernels.hpp"
#include "flowdsl/rope.hpp"
#include "flowdsl/safetensors.hpp"

namespace llm {

namespace fk = flowdsl::kernels;
using bf16 = __nv_bfloat16;
using i32 = std::int32_t;
using sample::DeviceArray;

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

inline float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

// ------------------------------------------------------------------ the model -------------------

/// The sizes of a Llama model, from its config.json.
struct Config {
  int layers = 2, hidden = 256, heads = 4, kv_heads = 2, head_dim = 64, intermediate = 512, vocab = 1024;
  double rope_theta = 500000.0;
  float rms_norm_eps = 1e-5f;
  bool tied = true;
  fk::RopeScaling scaling;

  int qkv_out() const { return (heads + 2 * kv_heads) * head_dim; }

  static Config read(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    const nlohmann::json j = nlohmann::json::parse(in);
    Config c;
    c.layers = j.at("num_hidden_layers").get<int>();
    c.hidden = j.at("hidden_size").get<int>();
    c.heads = j.at("num_attention_heads").get<int>();
    c.kv_heads = j.value("num_key_value_heads", c.heads);
    c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? j["head_dim"].get<int>() : c.hidden / c.heads;
    c.intermediate = j.at("intermediate_size").get<int>();
    c.vocab = j.at("vocab_size").get<int>();
    c.rms_norm_eps = j.value("rms_norm_eps", 1e-6f);
    c.tied = j.value("tie_word_embeddings", false);
    // transformers 5 writes the base and the scaling together as rope_parameters; 4 wrote
    // rope_theta and rope_scaling.
    const bool v5 = j.contains("rope_parameters") && j["rope_parameters"].is_object();
    c.rope_theta = v5 ? j["rope_parameters"].value("rope_theta", 10000.0) : j.value("rope_theta", 10000.0);
    const char* scaling_key = v5 ? "rope_parameters" : "rope_scaling";
    if (j.contains(scaling_key) && j[scaling_key].is_object()) {
      const auto& s = j[scaling_key];
      const std::string type = s.value("rope_type", s.value("type", std::string()));
      if (type == "llama3") {
        c.scaling.kind = fk::RopeScaling::Kind::llama3;
        c.scaling.factor = s.at("factor").get<double>();
        c.scaling.low_freq_factor = s.at("low_freq_factor").get<double>();
        c.scaling.high_freq_factor = s.at("high_freq_factor").get<double>();
        c.scaling.original_max_position = s.at("original_max_position_embeddings").get<double>();
      } else if (!type.empty() && type != "default") {
        throw std::runtime_error(path + ": rope_scaling type '" + type + "' is not supported (llama3 is)");
      }
    }
    if (c.layers < 1 || c.hidden < 1 || c.heads < 1 || c.kv_heads < 1 || c.heads % c.kv_heads != 0 || c.head_dim < 2 ||
        c.head_dim % 2 != 0 || c.intermediate < 1 || c.vocab < 1) {
      throw std::runtime_error(path + ": sizes out of range");
    }
    return c;
  }
};

/// Host copies of the weights (float values of the bf16 ones), for --check.
struct HostLayer {
  std::vector<float> input_norm, qkv, o, post_norm, gate_up, down;
};
struct HostModel {
  std::vector<float> embed, final_norm, lm_head;
  std::vector<HostLayer> layers;
};

/// The weights in device memory, in one allocation: q, k and v fused into one [qkv_out, hidden]
/// matrix a layer, gate and up into one [2 intermediate, hidden] (rows as Hugging Face keeps
/// them: [out, in]).
struct Model {
  Config config;
  DeviceArray<bf16> memory;
  struct Layer {
    const bf16 *input_norm, *qkv, *o, *post_norm, *gate_up, *down;
  };
  std::vector<Layer> layers;
  const bf16 *embed = nullptr, *final_norm = nullptr, *lm_head = nullptr;
  /// The rows of embed and lm_head this model holds: vocab_rows tokens from vocab_first (0: the
  /// whole vocabulary; a rank's share when split, see shard).
  int vocab_first = 0, vocab_rows = 0;
  int vocabulary_held() const { return vocab_rows > 0 ? vocab_rows : config.vocab; }
  std::size_t bytes_per_step = 0;  ///< weights a decode step reads: every layer's, the norm and the LM head
  std::optional<HostModel> host;
};

/// Element offsets of each weight in the one allocation.
struct Layout {
  std::size_t embed = 0, final_norm = 0, lm_head = 0, total = 0;
  struct Layer {
    std::size_t input_norm, qkv, o, post_norm, gate_up, down;
  };
  std::vector<Layer> layers;

  explicit Layout(const Config& c) {
    auto take = [&](std::size_t n) {
      const std::size_t at = total;
      total += (n + 63) / 64 * 64;  // 128-byte aligned
      return at;
    };
    const std::size_t h = std::size_t(c.hidden);
    embed = take(static_cast<std::size_t>(c.vocab) * h);
    for (int l = 0; l < c.layers; ++l) {
      Layer L{};
      L.input_norm = take(h);
      L.qkv = take(std::size_t(c.qkv_out()) * h);
      L.o = take(h * std::size_t(c.heads) * c.head_dim);
      L.post_norm = take(h);
      L.gate_up = take(2 * std::size_t(c.intermediate) * h);
      L.down = take(h * std::size_t(c.intermediate));
      layers.push_back(L);
    }
    final_norm = take(h);
    lm_head = c.tied ? embed : take(static_cast<std::size_t>(c.vocab) * h);
  }
};

inline void point_at(Model& m, const Layout& at) {
  const bf16* base = m.memory.get();
  m.embed = base + at.embed;
  m.final_norm = base + at.final_norm;
  m.lm_head = base + at.lm_head;
  m.layers.clear();
  for (const auto& L : at.layers) {
    m.layers.push_back({base + L.input_norm, base + L.qkv, base + L.o, base + L.post_norm, base + L.gate_up, base + L.down});
  }
  const Config& c = m.config;
  const std::size_t h = std::size_t(c.hidden);
  const std::size_t layer = 2 * h + std::size_t(c.qkv_out()) * h + h * c.heads * c.head_dim +
                            3 * std::size_t(c.intermediate) * h;
  m.bytes_per_step = 2 * (layer * c.layers + h + std::size_t(c.vocab) * h);
}

/// Uploads `count` bf16 values from the host staging buffer to element `at`.
inline void upload(Model& m, std::size_t at, const std::vector<std::uint16_t>& bits) {
  SAMPLE_CHECK(cudaMemcpy(m.memory.get() + at, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
}

inline std::vector<float> to_floats(const std::vector<std::uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const std::uint32_t word = std::uint32_t(bits[i]) << 16;
    std::memcpy(&out[i], &word, 4);
  }
  return out;
}

/// A random model of `c`'s sizes (weights N(0, 0.02), norms 1 + N(0, 0.02)), as
/// scripts/make_llama_checkpoint.py writes one, made in memory.
inline Model random_model(const Config& c, unsigned seed, bool keep_host) {
  Model m;
  m.config = c;
  const Layout at(c);
  m.memory = DeviceArray<bf16>(at.total);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  auto make = [&](std::size_t at_element, std::size_t n, bool norm, std::vector<float>* keep) {
    std::vector<std::uint16_t> bits(n);
    for (auto& b : bits) {
      const __nv_bfloat16 v = __float2bfloat16_rn(normal(rng) + (norm ? 1.0f : 0.0f));
      std::memcpy(&b, &v, 2);
    }
    upload(m, at_element, bits);
    if (keep != nullptr) *keep = to_floats(bits);
  };
  if (keep_host) m.host.emplace();
  HostModel* hm = keep_host ? &*m.host : nullptr;
  const std::size_t h = std::size_t(c.hidden);
  make(at.embed, std::size_t(c.vocab) * h, false, hm ? &hm->embed : nullptr);
  for (int l = 0; l < c.layers; ++l) {
    if (hm) hm->layers.emplace_back();
    HostLayer* hl = hm ? &hm->layers.back() : nullptr;
    const auto& L = at.layers[std::size_t(l)];
    make(L.input_norm, h, true, hl ? &hl->input_norm : nullptr);
    make(L.qkv, std::size_t(c.qkv_out()) * h, false, hl ? &hl->qkv : nullptr);
    make(L.o, h * c.heads * c.head_dim, false, hl ? &hl->o : nullptr);
    make(L.post_norm, h, true, hl ? &hl->post_norm : nullptr);
    make(L.gate_up, 2 * std::size_t(c.intermediate) * h, false, hl ? &hl->gate_up : nullptr);
    make(L.down, h * c.intermediate, false, hl ? &hl->down : nullptr);
  }
  make(at.final_norm, h, true, hm ? &hm->final_norm : nullptr);
  if (!c.tied) make(at.lm_head, std::size_t(c.vocab) * h, false, hm ? &hm->lm_head : nullptr);
  if (hm && c.tied) hm->lm_head = hm->embed;
  point_at(m, at);
  return m;
}

/// The model of a checkpoint folder: each tensor checked for its dtype and shape, read in chunks
/// and copied to the device once; q, k, v (and gate, up) land next to each other, fused.
inline Model load_model(const std::string& folder, bool keep_host, double& read_ms) {
  const auto start = Clock::now();
  Model m;
  m.config = Config::read(folder + "/config.json");
  const Config& c = m.config;
  const Layout at(c);
  const flowdsl::SafetensorsFile file = flowdsl::SafetensorsFile::open(folder + "/model.safetensors");
  m.memory = DeviceArray<bf16>(at.total);
  if (keep_host) m.host.emplace();
  constexpr std::size_t chunk = std::size_t{64} << 20;  // bytes staged at once
  const sample::PinnedArray<std::uint8_t> staging(chunk);
  auto copy = [&](const std::string& name, std::vector<std::uint64_t> shape, std::size_t to, std::vector<float>* keep) {
    const flowdsl::SafetensorsTensor* t = file.find(name);
    if (t == nullptr) throw std::runtime_error(file.path() + ": no tensor '" + name + "'");
    if (t->type != flowdsl::ScalarType::bf16 || t->shape != shape) {
      std::string want;
      for (auto d : shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
      throw std::runtime_error(file.path() + ": tensor '" + name + "' is not bf16 of shape [" + want + "]");
    }
    for (std::uint64_t done = 0; done < t->bytes; done += chunk) {
      const std::uint64_t n = std::min<std::uint64_t>(chunk, t->bytes - done);
      file.read(*t, done, n, staging.get());
      SAMPLE_CHECK(cudaMemcpy(reinterpret_cast<std::uint8_t*>(m.memory.get() + to) + done, staging.get(), n,
                              cudaMemcpyHostToDevice));
    }
    if (keep != nullptr) {
      std::vector<std::uint16_t> bits(t->bytes / 2);
      file.read(*t, bits.data());
      auto floats = to_floats(bits);
      keep->insert(keep->end(), floats.begin(), floats.end());
    }
  };
  const std::uint64_t h = std::uint64_t(c.hidden), q_out = std::uint64_t(c.heads) * c.head_dim,
                      kv_out = std::uint64_t(c.kv_heads) * c.head_dim, inter = std::uint64_t(c.intermediate);
  HostModel* hm = keep_host ? &*m.host : nullptr;
  copy("model.embed_tokens.weight", {std::uint64_t(c.vocab), h}, at.embed, hm ? &hm->embed : nullptr);
  for (int l = 0; l < c.layers; ++l) {
    if (hm) hm->layers.emplace_back();
    HostLayer* hl = hm ? &hm->layers.back() : nullptr;
    const auto& L = at.layers[std::size_t(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    copy(p + "input_layernorm.weight", {h}, L.input_norm, hl ? &hl->input_norm : nullptr);
    copy(p + "self_attn.q_proj.weight", {q_out, h}, L.qkv, hl ? &hl->qkv : nullptr);
    copy(p + "self_attn.k_proj.weight", {kv_out, h}, L.qkv + q_out * h, hl ? &hl->qkv : nullptr);
    copy(p + "self_attn.v_proj.weight", {kv_out, h}, L.qkv + (q_out + kv_out) * h, hl ? &hl->qkv : nullptr);
    copy(p + "self_attn.o_proj.weight", {h, q_out}, L.o, hl ? &hl->o : nullptr);
    copy(p + "post_attention_layernorm.weight", {h}, L.post_norm, hl ? &hl->post_norm : nullptr);
    copy(p + "mlp.gate_proj.weight", {inter, h}, L.gate_up, hl ? &hl->gate_up : nullptr);
    copy(p + "mlp.up_proj.weight", {inter, h}, L.gate_up + inter * h, hl ? &hl->gate_up : nullptr);
    copy(p + "mlp.down_proj.weight", {h, inter}, L.down, hl ? &hl->down : nullptr);
  }
  copy("model.norm.weight", {h}, at.final_norm, hm ? &hm->final_norm : nullptr);
  if (c.tied) {
    if (hm) hm->lm_head = hm->embed;
  } else {
    copy("lm_head.weight", {std::uint64_t(c.vocab), h}, at.lm_head, hm ? &hm->lm_head : nullptr);
  }
  SAMPLE_CHECK(cudaDeviceSynchronize());
  point_at(m, at);
  read_ms = ms_since(start);
  return m;
}

// ------------------------------------------------------------------ the step's graph ------------

enum class LinearKind { gemv, cublaslt };

/// Activations and the paged KV cache, sized for `max_tokens` tokens a step and `sequences`
/// sequences of up to `max_context` positions.
struct State {
  fk::PagedKv kv;
  int max_tokens = 0, max_context = 0;
  DeviceArray<i32> tokens, positions, seq_of_token, block_table, last_index, next;
  DeviceArray<bf16> x, h, qkv, q, attn, o, gate_up, act, mlp, hlast, logits;
  DeviceArray<std::uint64_t> keys;  // argmax keys of the rows (a vocabulary split over ranks)
  DeviceArray<float> inv_freq, workspace;
  std::vector<DeviceArray<bf16>> k_cache, v_cache;

  State(const Config& c, int sequences, int max_tokens_, int max_context_, int page_size, unsigned seed)
      : max_tokens(max_tokens_), max_context(max_context_) {
    kv.q_heads = c.heads;
    kv.kv_heads = c.kv_heads;
    kv.head_dim = c.head_dim;
    kv.page_size = page_size;
    kv.pages_per_seq = (max_context + page_size - 1) / page_size;
    kv.sequences = sequences;
    kv.pages = kv.pages_per_seq * sequences;
    const std::size_t T = std::size_t(max_tokens), H = std::size_t(c.hidden);
    tokens = DeviceArray<i32>(T);
    positions = DeviceArray<i32>(T);
    seq_of_token = DeviceArray<i32>(T);
    last_index = DeviceArray<i32>(std::size_t(sequences));
    next = DeviceArray<i32>(std::size_t(sequences));
    x = DeviceArray<bf16>(T * H);
    h = DeviceArray<bf16>(T * H);
    qkv = DeviceArray<bf16>(T * c.qkv_out());
    q = DeviceArray<bf16>(T * c.heads * c.head_dim);
    attn = DeviceArray<bf16>(T * c.heads * c.head_dim);
    o = DeviceArray<bf16>(T * H);
    gate_up = DeviceArray<bf16>(T * 2 * c.intermediate);
    act = DeviceArray<bf16>(T * c.intermediate);
    mlp = DeviceArray<bf16>(T * H);
    hlast = DeviceArray<bf16>(std::size_t(sequences) * H);
    logits = DeviceArray<bf16>(std::max(T, std::size_t(sequences)) * c.vocab);
    keys = DeviceArray<std::uint64_t>(std::max(T, std::size_t(sequences)));
    // The splits depend on the tokens of a step: the workspace holds what any step up to
    // max_tokens needs.
    std::int64_t floats = 1;
    for (int t = 1; t <= max_tokens; ++t) floats = std::max(floats, fk::attention_workspace_floats(t, kv, max_context));
    workspace = DeviceArray<float>(static_cast<std::size_t>(floats));
    const std::vector<float> f = fk::rope_inverse_frequencies(c.head_dim, c.rope_theta, c.scaling);
    inv_freq = sample::device_copy(f);
    const std::size_t pool = std::size_t(kv.pages) * kv.kv_heads * kv.page_size * kv.head_dim;
    for (int l = 0; l < c.layers; ++l) {
      k_cache.emplace_back(pool);
      v_cache.emplace_back(pool);
      SAMPLE_CHECK(cudaMemset(k_cache.back().get(), 0, k_cache.back().bytes()));
      SAMPLE_CHECK(cudaMemset(v_cache.back().get(), 0, v_cache.back().bytes()));
    }
    // Pages handed out shuffled, as a serving engine's pool ends up after a while.
    std::vector<i32> pages(static_cast<std::size_t>(kv.pages));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), std::mt19937(seed));
    block_table = sample::device_copy(pages);
  }
  fk::DecodeTokens batch(int count) const { return {count, positions.get(), seq_of_token.get(), block_table.get()}; }
  /// Bytes of the activations and the workspace: what a step's graphs share, the cache aside.
  std::size_t activation_bytes() const {
    std::size_t bytes = workspace.bytes() + inv_freq.bytes();
    for (const auto* a : {&tokens, &positions, &seq_of_token, &last_index, &next}) bytes += a->bytes();
    for (const auto* a : {&x, &h, &qkv, &q, &attn, &o, &gate_up, &act, &mlp, &hlast, &logits}) bytes += a->bytes();
    return bytes;
  }
};

/// A step split over ranks (tensor parallel): this rank, how many, and how a partial sum of `count`
/// bf16 elements is summed across them in place (an NCCL all-reduce node, declared into `g` as
/// `name`). The model given with it is this rank's shard().
struct Parallel {
  int rank = 0, world = 1;
  /// A node that sums data[0 .. count) over the ranks in place.
  std::function<flowdsl::NodeHandle(flowdsl::kernels::Into g, const std::string& name, bf16* data, std::size_t count)> sum;
  /// A node that takes the largest of keys[0 .. count) over the ranks in place (argmax keys).
  std::function<flowdsl::NodeHandle(flowdsl::kernels::Into g, const std::string& name, std::uint64_t* keys, std::size_t count)>
      max;
  /// A node that gathers every rank's send[0 .. count) into recv, rank r's at recv + r * count.
  std::function<flowdsl::NodeHandle(flowdsl::kernels::Into g, const std::string& name, const bf16* send, bf16* recv,
                                    std::size_t count)>
      gather;
};

/// This rank's part of `full` split over `world` ranks: its share of the query and key/value heads
/// (rows of the fused qkv matrix) and of the MLP's columns (rows of gate and of up), the
/// matching columns of the output and down projections, and its share of the vocabulary (rows
/// of the embedding and of the LM head, one copy when they are tied), copied into an allocation
/// of its own; the norms stay pointers into `full`, which must outlive the part. Its config
/// counts this rank's heads and columns, and its vocab_first and vocab_rows its tokens.
/// \throws std::runtime_error when the heads, key/value heads, MLP columns or vocabulary do not
/// divide by world.
inline Model shard(const Model& full, int rank, int world) {
  const Config& c = full.config;
  if (world < 1 || c.heads % world != 0 || c.kv_heads % world != 0 || c.intermediate % world != 0 || c.vocab % world != 0) {
    throw std::runtime_error(std::to_string(world) + " ranks do not divide " + std::to_string(c.heads) + " heads, " +
                             std::to_string(c.kv_heads) + " key/value heads, " + std::to_string(c.intermediate) +
                             " MLP columns and " + std::to_string(c.vocab) + " tokens");
  }
  Model m;
  m.config = c;
  m.config.heads = c.heads / world;
  m.config.kv_heads = c.kv_heads / world;
  m.config.intermediate = c.intermediate / world;
  const Config& p = m.config;
  const std::size_t H = std::size_t(c.hidden), D = std::size_t(c.head_dim), E = sizeof(bf16);
  const std::size_t qkv = std::size_t(p.qkv_out()) * H, o = H * std::size_t(p.heads) * D,
                    gate_up = 2 * std::size_t(p.intermediate) * H, down = H * std::size_t(p.intermediate);
  const std::size_t per_layer = qkv + o + gate_up + down;
  const std::size_t V = std::size_t(c.vocab / world), vocab_block = V * H;
  const bool tied = full.lm_head == full.embed;
  m.memory = DeviceArray<bf16>(per_layer * std::size_t(c.layers) + (tied ? 1 : 2) * vocab_block);
  const auto rows = [&](bf16* to, const bf16* from, std::size_t first, std::size_t count) {
    SAMPLE_CHECK(cudaMemcpy(to, from + first * H, count * H * E, cudaMemcpyDeviceToDevice));
  };
  // A [H, columns] block of a row-major [H, of] matrix, from column `first`.
  const auto columns = [&](bf16* to, const bf16* from, std::size_t first, std::size_t count, std::size_t of) {
    SAMPLE_CHECK(cudaMemcpy2D(to, count * E, from + first, of * E, count * E, H, cudaMemcpyDeviceToDevice));
  };
  const std::size_t r = std::size_t(rank), q_rows = std::size_t(p.heads) * D, kv_rows = std::size_t(p.kv_heads) * D;
  const std::size_t I = std::size_t(p.intermediate);
  for (int l = 0; l < c.layers; ++l) {
    const Model::Layer& F = full.layers[std::size_t(l)];
    bf16* at = m.memory.get() + per_layer * std::size_t(l);
    Model::Layer L{};
    L.input_norm = F.input_norm;
    L.post_norm = F.post_norm;
    bf16* w = at;
    rows(w, F.qkv, r * q_rows, q_rows);                                                        // q
    rows(w + q_rows * H, F.qkv, std::size_t(c.heads) * D + r * kv_rows, kv_rows);              // k
    rows(w + (q_rows + kv_rows) * H, F.qkv, std::size_t(c.heads + c.kv_heads) * D + r * kv_rows, kv_rows);  // v
    L.qkv = w;
    w += qkv;
    columns(w, F.o, r * q_rows, q_rows, std::size_t(c.heads) * D);
    L.o = w;
    w += o;
    rows(w, F.gate_up, r * I, I);                                     // gate
    rows(w + I * H, F.gate_up, std::size_t(c.intermediate) + r * I, I);  // up
    L.gate_up = w;
    w += gate_up;
    columns(w, F.down, r * I, I, std::size_t(c.intermediate));
    L.down = w;
    m.layers.push_back(L);
  }
  // The vocabulary: this rank's V tokens, from token r * V, of the embedding and the LM head.
  bf16* vocabulary = m.memory.get() + per_layer * std::size_t(c.layers);
  m.vocab_first = static_cast<int>(r * V);
  m.vocab_rows = static_cast<int>(V);
  rows(vocabulary, full.embed, r * V, V);
  m.embed = vocabulary;
  if (tied) {
    m.lm_head = vocabulary;
  } else {
    rows(vocabulary + vocab_block, full.lm_head, r * V, V);
    m.lm_head = vocabulary + vocab_block;
  }
  m.final_norm = full.final_norm;
  // What this rank reads a step: its part of every layer and of the LM head, the norms.
  m.bytes_per_step = E * (std::size_t(c.layers) * (per_layer + 2 * H) + H + vocab_block);
  return m;
}

/// One step's graph: `tokens` tokens (a decode step: one a sequence; a prefill chunk: several)
/// through every layer, then the LM head on `rows` rows and the next token of each. A decode
/// step's rows are its tokens and its next tokens overwrite its input, positions advancing; a
/// prefill chunk's rows are gathered at last_index and its next tokens go to `next`.
struct Step {
  flowdsl::Graph g;
  int tokens = 0, rows = 0;
  bool decode = true;
};

/// Declares one step's nodes into `g` (a graph, or the body of a decode loop) after the node
/// named `last` (none when empty), as build_step describes; a decode step advances its positions
/// when `advance`. Returns the name of its last node.
inline std::string declare_step(flowdsl::kernels::Into g, const Model& m, State& s, int tokens, int rows, bool decode,
                         bool advance, LinearKind kind, float temperature, int top_k, float top_p, std::uint64_t seed,
                         const i32* sample_step, std::string last = {}, const Parallel* tp = nullptr) {
  const Config& c = m.config;
  // Split over ranks, the projections back to the hidden size (o, down) give partial sums: each
  // is summed across the ranks in place. Where the kernel adds its product into x, rank 0 adds
  // and the others write theirs over x, so that the sum is x plus every rank's part.
  const bool split = tp != nullptr && tp->sum;
  const bool adds = !split || tp->rank == 0;
  auto chain = [&](auto&& node, const std::string& name) -> void {
    if (!last.empty()) node.after(last);
    last = name;
  };
  auto sum = [&](bf16* data, const std::string& name) {
    if (split) chain(tp->sum(g, name, data, std::size_t(tokens) * std::size_t(c.hidden)), name);
  };
  auto cublaslt = [&](const std::string& name, int m_rows, int n, int k, const bf16* x, const bf16* w, bf16* y) {
    chain(fk::cublaslt_linear<bf16, bf16>(g, name, m_rows, n, k, x, w, nullptr, fk::Epilogue::none, y), name);
  };
  const int H = c.hidden, D = c.head_dim;
  // flowdsl's small-batch kernel takes each norm into the projection after it and adds the
  // attention's and the MLP's outputs into the residual stream x itself: 7 kernels a layer. With
  // cuBLASLt the norms are kernels of their own (add_rms_norm adds, then normalises): 9 (10).
  const bool fused = kind == LinearKind::gemv;
  // Split over ranks, the vocabulary too: each rank gathers the tokens it holds (zeros for the
  // others' tokens), and a sum gives every rank the whole embedding of the step.
  const int V = m.vocabulary_held();
  if (split) {
    chain(fk::gather_rows_from(g, "embed", tokens, H, s.tokens.get(), m.vocab_first, V, m.embed, s.x.get()), "embed");
    sum(s.x.get(), "embed.sum");
  } else {
    chain(fk::gather_rows(g, "embed", tokens, H, s.tokens.get(), c.vocab, m.embed, s.x.get()), "embed");
  }
  if (!fused) {
    chain(fk::rms_norm(g, "norm.0", tokens, H, c.rms_norm_eps, static_cast<const bf16*>(s.x.get()),
                       m.layers[0].input_norm, s.h.get()),
          "norm.0");
  }
  const fk::DecodeTokens batch = s.batch(tokens);
  for (int l = 0; l < c.layers; ++l) {
    const auto& L = m.layers[std::size_t(l)];
    const std::string p = "layer" + std::to_string(l) + ".";
    if (fused) {
      chain(fk::linear_norm(g, p + "qkv", tokens, c.qkv_out(), H, c.rms_norm_eps, static_cast<const bf16*>(s.x.get()),
                            L.input_norm, L.qkv, s.qkv.get()),
            p + "qkv");
    } else {
      cublaslt(p + "qkv", tokens, c.qkv_out(), H, s.h.get(), L.qkv, s.qkv.get());
    }
    chain(fk::rope_kv_append(g, p + "rope", s.kv, batch, static_cast<const bf16*>(s.qkv.get()), s.inv_freq.get(), s.q.get(),
                             s.k_cache[std::size_t(l)].get(), s.v_cache[std::size_t(l)].get()),
          p + "rope");
    auto attention = fk::decode_attention(g, p + "attention", s.kv, batch, s.max_context, 1.0f / std::sqrt(float(D)),
                                          static_cast<const bf16*>(s.q.get()), s.k_cache[std::size_t(l)].get(),
                                          s.v_cache[std::size_t(l)].get(), s.workspace.get(), s.attn.get());
    attention.after(last);
    last = p + "attention";
    if (fused) {
      const bf16* attn = s.attn.get();
      if (adds) {
        chain(fk::linear_residual(g, p + "o", tokens, H, c.heads * D, attn, L.o, s.x.get()), p + "o");
      } else {
        chain(fk::linear(g, p + "o", tokens, H, c.heads * D, attn, L.o, s.x.get()), p + "o");
      }
      sum(s.x.get(), p + "o.sum");
      chain(fk::linear_norm(g, p + "gate_up", tokens, 2 * c.intermediate, H, c.rms_norm_eps,
                            static_cast<const bf16*>(s.x.get()), L.post_norm, L.gate_up, s.gate_up.get()),
            p + "gate_up");
      const bf16* gate_up = s.gate_up.get();
      if (adds) {
        chain(fk::linear_gated_residual(g, p + "down", tokens, H, c.intermediate, gate_up, L.down, s.x.get()), p + "down");
      } else {
        chain(fk::linear_gated(g, p + "down", tokens, H, c.intermediate, gate_up, L.down, s.x.get()), p + "down");
      }
      sum(s.x.get(), p + "down.sum");
      continue;
    }
    cublaslt(p + "o", tokens, H, c.heads * D, s.attn.get(), L.o, s.o.get());
    sum(s.o.get(), p + "o.sum");
    chain(fk::add_rms_norm(g, p + "post_norm", tokens, H, c.rms_norm_eps, s.x.get(), static_cast<const bf16*>(s.o.get()),
                           L.post_norm, s.h.get()),
          p + "post_norm");
    // cuBLASLt takes its input as it is: gate and up into two halves, their product, then down.
    const std::size_t half = std::size_t(tokens) * c.intermediate;
    bf16* gate = s.gate_up.get();
    bf16* up = s.gate_up.get() + half;
    cublaslt(p + "gate", tokens, c.intermediate, H, s.h.get(), L.gate_up, gate);
    cublaslt(p + "up", tokens, c.intermediate, H, s.h.get(), L.gate_up + std::size_t(c.intermediate) * H, up);
    chain(fk::silu_mul(g, p + "act", std::int64_t(half), static_cast<const bf16*>(gate), static_cast<const bf16*>(up),
                       s.act.get()),
          p + "act");
    cublaslt(p + "down", tokens, H, c.intermediate, s.act.get(), L.down, s.mlp.get());
    sum(s.mlp.get(), p + "down.sum");
    const bf16* next_norm = l + 1 < c.layers ? m.layers[std::size_t(l) + 1].input_norm : m.final_norm;
    chain(fk::add_rms_norm(g, p + "next_norm", tokens, H, c.rms_norm_eps, s.x.get(), static_cast<const bf16*>(s.mlp.get()),
                           next_norm, s.h.get()),
          p + "next_norm");
  }
  // The LM head reads the final norm of x (fused), or h, at the rows that make tokens.
  const bf16* head_in = fused ? static_cast<const bf16*>(s.x.get()) : static_cast<const bf16*>(s.h.get());
  if (!decode) {
    chain(fk::gather_rows(g, "last_rows", rows, H, s.last_index.get(), tokens, head_in, s.hlast.get()), "last_rows");
    head_in = s.hlast.get();
  }
  if (fused) {
    chain(fk::linear_norm(g, "lm_head", rows, V, H, c.rms_norm_eps, head_in, m.final_norm, m.lm_head, s.logits.get()),
          "lm_head");
  } else {
    cublaslt("lm_head", rows, V, H, head_in, m.lm_head, s.logits.get());
  }
  i32* out = decode ? s.tokens.get() : s.next.get();
  if (split) {
    // Each rank's logits are its share of the vocabulary: the largest argmax key over the ranks
    // is the whole row's argmax (greedy only).
    if (temperature > 0.0f) throw std::runtime_error("a vocabulary split over ranks decodes greedily (temperature 0)");
    chain(fk::row_argmax_key(g, "argmax", rows, V, m.vocab_first, static_cast<const bf16*>(s.logits.get()), s.keys.get()),
          "argmax");
    chain(tp->max(g, "argmax.max", s.keys.get(), std::size_t(rows)), "argmax.max");
    chain(fk::argmax_key_token(g, "argmax.token", rows, static_cast<const std::uint64_t*>(s.keys.get()), out),
          "argmax.token");
  } else if (temperature > 0.0f) {
    chain(fk::sample_top_p(g, "sample", rows, c.vocab, temperature, top_k, top_p, seed, sample_step,
                           static_cast<const bf16*>(s.logits.get()), out),
          "sample");
  } else {
    chain(fk::row_argmax(g, "argmax", rows, c.vocab, static_cast<const bf16*>(s.logits.get()), out), "argmax");
  }
  if (decode && advance) chain(fk::advance_positions(g, "advance", tokens, s.positions.get()), "advance");
  return last;
}

inline std::unique_ptr<Step> build_step(const Model& m, State& s, int tokens, int rows, bool decode, LinearKind kind,
                                 float temperature, int top_k, float top_p, std::uint64_t seed, const i32* sample_step,
                                 const Parallel* tp = nullptr) {
  auto step = std::make_unique<Step>();
  step->tokens = tokens;
  step->rows = rows;
  step->decode = decode;
  declare_step(step->g, m, s, tokens, rows, decode, true, kind, temperature, top_k, top_p, seed, sample_step, {}, tp);
  return step;
}

/// Up to `steps` decode steps of `batch` sequences in one launch: decode_loop_begin, then a WHILE
/// whose body is the decode step and decode_loop_step. remaining[b] says how many tokens sequence
/// b may still make; the tokens land in out ([batch, steps], -1 where a sequence made none) and
/// step[0] says how many steps ran.
struct LoopState {
  DeviceArray<i32> remaining, out, step;
  LoopState(int batch, int steps)
      : remaining(std::size_t(batch)), out(std::size_t(batch) * std::size_t(steps)), step(1) {}
};

inline flowdsl::Graph build_loop(const Model& m, State& s, LoopState& l, int batch, int steps, i32 end_token, LinearKind kind) {
  flowdsl::Graph g;
  auto loop = g.while_loop("decode", flowdsl::ConditionDefault{0});
  auto begin = fk::decode_loop_begin(g, "begin", batch, steps, static_cast<const i32*>(l.remaining.get()), l.step.get(),
                                     loop.condition());
  loop.after(begin);
  const std::string last = declare_step(loop.body(), m, s, batch, batch, true, false, kind, 0.0f, 0, 1.0f, 0, nullptr);
  fk::decode_loop_step(loop.body(), "loop_step", batch, steps, end_token, static_cast<const i32*>(s.tokens.get()),
                       s.positions.get(), l.remaining.get(), l.out.get(), l.step.get(), loop.condition())
      .after(last);
  return g;
}

/// Every bucket's decode step in one executable: condition_bucket picks, from count[0] (the
/// batch), the body of a SWITCH holding the step of the smallest bucket that holds it. `buckets`
/// are 1, 2, 4, ... (what condition_bucket picks among); each body's step advances its positions.
inline flowdsl::Graph build_switch(const Model& m, State& s, const std::vector<int>& buckets, const i32* count,
                                   const std::function<LinearKind(int)>& kind_for) {
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i] != 1 << i) throw std::runtime_error("a SWITCH over buckets takes 1, 2, 4, ... (powers of two)");
  }
  flowdsl::Graph g;
  auto bucket = g.switch_cases("bucket", static_cast<std::uint32_t>(buckets.size()));
  auto decide = fk::condition_bucket(g, "decide", count, static_cast<i32>(buckets.size()), bucket.condition());
  bucket.after(decide);
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const int b = buckets[i];
    declare_step(bucket.body(static_cast<std::uint32_t>(i)), m, s, b, b, true, true, kind_for(b), 0.0f, 0, 1.0f, 0,
                 nullptr);
  }
  return g;
}

template <class T>
inline void put(const DeviceArray<T>& d, const std::vector<T>& v) {
  SAMPLE_CHECK(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T>
std::vector<T> get(const DeviceArray<T>& d, std::size_t n) {
  std::vector<T> v(n);
  SAMPLE_CHECK(cudaMemcpy(v.data(), d.get(), n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace llm
