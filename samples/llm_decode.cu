// SPDX-License-Identifier: Apache-2.0
// A Llama decoder served by flowdsl graphs: reads a Hugging Face checkpoint (config.json and
// model.safetensors, bf16), builds the decode step as one graph per batch bucket, prefills the
// prompts by chunks through the same attention kernel, and generates greedily (or samples with
// --temperature). Each step's graph ends by writing every sequence's next token over its input
// and advancing its position, so the executable is launched again as it is, with no host write
// between steps.
//
//   llm_decode                                   a random tiny model, checked against the host
//   llm_decode --model /tmp/llama1b --batch 8 --generate 32 --dump /tmp/out
//   llm_decode --model /tmp/llama1b --bench --batches 1,8,32,64 --context 512 --json out.json
//
// --check compares the logits and tokens with a host reference of the same model (small models:
// it runs the whole model on the CPU); scripts/check_llama_hf.py compares a --dump with Hugging
// Face transformers.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common.cuh"
#include "flowdsl/cublaslt.hpp"
#include "flowdsl/family.hpp"
#include "flowdsl/json.hpp"
#include "flowdsl/kernels.hpp"
#ifdef FLOWDSL_HAS_NCCL
#include "flowdsl/nccl.hpp"
#endif
#include "flowdsl/profiler.hpp"
#include "flowdsl/rope.hpp"
#include "flowdsl/runtime.hpp"
#include "flowdsl/safetensors.hpp"
#include "llm_model.cuh"

using namespace llm;  // the model, its weights and state, a step's graph (llm_model.cuh)

namespace {

// ------------------------------------------------------------------ the host reference ----------

/// The model on the host, one token at a time, rounding to bf16 where the graph's kernels write
/// bf16: the reference --check compares with (for small models; it is plain loops).
class HostDecoder {
 public:
  HostDecoder(const Config& c, const HostModel& w)
      : c_(c), w_(w), inv_freq_(fk::rope_inverse_frequencies(c.head_dim, c.rope_theta, c.scaling)) {}

  /// The logits after token `token` at the next position of sequence `seq`.
  std::vector<float> forward(int seq, int token) {
    auto& cache = caches_[seq];
    if (cache.k.empty()) cache.k.resize(std::size_t(c_.layers)), cache.v.resize(std::size_t(c_.layers));
    const int pos = cache.length++;
    const int H = c_.hidden, D = c_.head_dim, kvd = c_.kv_heads * D;
    std::vector<float> x(w_.embed.begin() + std::size_t(token) * H, w_.embed.begin() + std::size_t(token + 1) * H);
    std::vector<float> h = norm(x, w_.layers[0].input_norm);
    for (int l = 0; l < c_.layers; ++l) {
      const HostLayer& L = w_.layers[std::size_t(l)];
      std::vector<float> qkv = matvec(L.qkv, h, c_.qkv_out());
      // Rotary embedding of the query and key heads (the two halves of a head paired).
      for (int head = 0; head < c_.heads + c_.kv_heads; ++head) {
        float* v = qkv.data() + std::size_t(head) * D;
        for (int j = 0; j < D / 2; ++j) {
          const double angle = double(pos) * inv_freq_[std::size_t(j)];
          const double x1 = v[j], x2 = v[j + D / 2];
          v[j] = round_bf16(float(x1 * std::cos(angle) - x2 * std::sin(angle)));
          v[j + D / 2] = round_bf16(float(x2 * std::cos(angle) + x1 * std::sin(angle)));
        }
      }
      const float* k_new = qkv.data() + std::size_t(c_.heads) * D;
      cache.k[std::size_t(l)].insert(cache.k[std::size_t(l)].end(), k_new, k_new + kvd);
      cache.v[std::size_t(l)].insert(cache.v[std::size_t(l)].end(), k_new + kvd, k_new + 2 * kvd);
      std::vector<float> attn(static_cast<std::size_t>(c_.heads) * D);
      const int group = c_.heads / c_.kv_heads;
      for (int qh = 0; qh < c_.heads; ++qh) {
        const float* q = qkv.data() + std::size_t(qh) * D;
        const int kh = qh / group;
        std::vector<double> score(static_cast<std::size_t>(pos) + 1);
        double top = -1e300;
        for (int p = 0; p <= pos; ++p) {
          const float* k = cache.k[std::size_t(l)].data() + std::size_t(p) * kvd + std::size_t(kh) * D;
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += double(q[d]) * k[d];
          score[std::size_t(p)] = dot / std::sqrt(double(D));
          top = std::max(top, score[std::size_t(p)]);
        }
        double total = 0;
        for (double& s : score) total += (s = std::exp(s - top));
        for (int d = 0; d < D; ++d) {
          double acc = 0;
          for (int p = 0; p <= pos; ++p) {
            acc += score[std::size_t(p)] * cache.v[std::size_t(l)][std::size_t(p) * kvd + std::size_t(kh) * D + std::size_t(d)];
          }
          attn[std::size_t(qh) * D + std::size_t(d)] = round_bf16(float(acc / total));
        }
      }
      add(x, matvec(L.o, attn, H));
      h = norm(x, L.post_norm);
      const std::vector<float> gate_up = matvec(L.gate_up, h, 2 * c_.intermediate);
      std::vector<float> act(static_cast<std::size_t>(c_.intermediate));
      for (int i = 0; i < c_.intermediate; ++i) {
        const double g = gate_up[std::size_t(i)];
        act[std::size_t(i)] = round_bf16(round_bf16(float(g / (1.0 + std::exp(-g)))) * gate_up[std::size_t(c_.intermediate + i)]);
      }
      add(x, matvec(L.down, act, H));
      h = norm(x, l + 1 < c_.layers ? w_.layers[std::size_t(l) + 1].input_norm : w_.final_norm);
    }
    return matvec(w_.lm_head, h, c_.vocab);
  }

 private:
  struct Cache {
    int length = 0;
    std::vector<std::vector<float>> k, v;  // [layer][position * kv_heads * head_dim]
  };

  /// bf16(bf16(x / rms(x)) * w), as LlamaRMSNorm rounds.
  std::vector<float> norm(const std::vector<float>& x, const std::vector<float>& w) const {
    double squares = 0;
    for (const float v : x) squares += double(v) * v;
    const float r = float(1.0 / std::sqrt(squares / double(x.size()) + c_.rms_norm_eps));
    std::vector<float> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = round_bf16(round_bf16(x[i] * r) * w[i]);
    return y;
  }
  /// bf16(w x) for w [n, x.size()].
  static std::vector<float> matvec(const std::vector<float>& w, const std::vector<float>& x, int n) {
    std::vector<float> y(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      double acc = 0;
      const float* row = w.data() + std::size_t(r) * x.size();
      for (std::size_t i = 0; i < x.size(); ++i) acc += double(row[i]) * x[i];
      y[std::size_t(r)] = round_bf16(float(acc));
    }
    return y;
  }
  static void add(std::vector<float>& x, const std::vector<float>& y) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = round_bf16(x[i] + y[i]);
  }

  const Config& c_;
  const HostModel& w_;
  std::vector<float> inv_freq_;
  std::map<int, Cache> caches_;
};

// ------------------------------------------------------------------ running it ------------------

/// Writes the decode step of `batch` sequences at `position` (a cache of zeros before it) as
/// a graph file `folder`/decode.json whose weights come from the checkpoint's safetensors by name
/// (fused matrices as lists of tensors), its inputs from .npy files beside it, and the tokens the
/// C++ graph makes in `steps` launches as expected_tokens.npy: `flowdsl run -n steps decode.json
/// --out DIR` must write the same DIR/tokens.npy.
void write_graph(const std::string& folder, const std::string& model_folder, const Model& m, int batch, int steps,
                 int position, int page_size, bool programmatic, int family);

struct Options {
  std::string model;  // empty: a random tiny model in memory
  int batch = 4, prompt = 40, generate = 32, chunk = 16, page_size = 16, max_context = 0;
  std::string linear = "auto";
  int gemv_max = 1;  // auto: the matrix-vector kernel up to this many rows, cuBLASLt above
  bool check = false, bench = false, programmatic = false;
  int profile = 0;  // bench: launches of each batch's fastest step and of the prefill chunk profiled
  std::string dump, json_path, batches = "1,8,32,64", graph_folder;
  int graph_position = 0;  // --write-graph: the position every sequence starts at (its cache before it zeros)
  int dump_logits = -1, context = 512, steps = 100, runs = 3, prefill_seqs = 8, prefill_chunk = 64;
  float temperature = 0.0f, top_p = 1.0f;
  int top_k = 0;
  int family = 0;  // bench: the decode step as a family of buckets 1, 2, 4, ... up to this
  int loop = 0;    // bench: this many decode steps a launch in a loop on the device, beside host launches
  bool ranks = false;  // tensor parallel over the ranks the launcher started (generation and --bench)
  unsigned seed = 1;
};

LinearKind pick(const Options& o, int rows) {
  if (o.linear == "gemv") return LinearKind::gemv;
  if (o.linear == "cublaslt") return LinearKind::cublaslt;
  return rows <= o.gemv_max ? LinearKind::gemv : LinearKind::cublaslt;
}

std::vector<float> logits_of(const State& s, int rows, int vocab) {
  std::vector<bf16> bits(static_cast<std::size_t>(rows) * vocab);
  SAMPLE_CHECK(cudaMemcpy(bits.data(), s.logits.get(), bits.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
  std::vector<float> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) out[i] = __bfloat162float(bits[i]);
  return out;
}


/// `values` as a NumPy 1.0 file of `shape` (float32 or int32, little-endian, C order).
template <class T>
void write_npy(const std::string& path, const std::vector<T>& values, const std::vector<std::size_t>& shape) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, i32>);
  std::string dims;
  for (const auto d : shape) dims += std::to_string(d) + ", ";
  std::string header = std::string("{'descr': '") + (std::is_same_v<T, float> ? "<f4" : "<i4") +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  header += std::string(63 - (10 + header.size()) % 64, ' ') + "\n";
  std::ofstream out(path, std::ios::binary);
  const std::uint16_t length = static_cast<std::uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&length), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(values.data()), std::streamsize(values.size() * sizeof(T)));
  if (!out) throw std::runtime_error("cannot write " + path);
}
/// A one-dimensional int32 array.
void write_ints(const std::string& path, const std::vector<i32>& values) { write_npy(path, values, {values.size()}); }

/// Prefill by chunks, then decode; --check and --dump. Returns false when the check fails.
bool generate(const Options& o, const Model& m, const Model& part, const Parallel* tp) {
  const Config& c = m.config;
  const int B = o.batch;
  std::mt19937 rng(o.seed);
  std::vector<std::vector<i32>> prompts(static_cast<std::size_t>(B));
  int longest = 0;
  for (auto& p : prompts) {
    const int length = std::uniform_int_distribution<int>(std::max(1, o.prompt / 2), std::max(1, o.prompt))(rng);
    for (int i = 0; i < length; ++i) p.push_back(std::uniform_int_distribution<int>(0, c.vocab - 1)(rng));
    longest = std::max(longest, length);
  }
  const int max_context = o.max_context > 0 ? o.max_context : longest + o.generate + 1;
  State s(part.config, B, std::max(B * o.chunk, B), max_context, o.page_size, o.seed);
  auto stream = flowdsl::make_stream();
  flowdsl::Runtime runtime;
  DeviceArray<i32> sample_step(1);
  SAMPLE_CHECK(cudaMemset(sample_step.get(), 0, sizeof(i32)));
  const auto build = [&](int tokens, int rows, bool decode) {
    auto step = build_step(part, s, tokens, rows, decode, pick(o, tokens), o.temperature, o.top_k, o.top_p, o.seed,
                           sample_step.get(), tp);
    step->g.programmatic_edges(o.programmatic);
    return step;
  };
  // The logits of the last step's rows, [rows, vocab]. With the vocabulary split over ranks each
  // holds [rows, its share]: a gather over the ranks (every rank launches it) puts them together.
  const int held = part.vocabulary_held();
  DeviceArray<bf16> gathered(held < c.vocab ? std::size_t(B) * c.vocab : 0);
  const auto logits_now = [&](int rows) {
    if (held == c.vocab) return logits_of(s, rows, c.vocab);
    flowdsl::Graph g;
    tp->gather(g, "logits", s.logits.get(), gathered.get(), std::size_t(rows) * held);
    runtime.launch(g, stream.get());
    SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
    std::vector<bf16> bits(std::size_t(rows) * c.vocab);
    SAMPLE_CHECK(cudaMemcpy(bits.data(), gathered.get(), bits.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
    std::vector<float> out(bits.size());
    const std::size_t share = std::size_t(rows) * held;  // rank r's [rows, held] at r * share
    for (std::size_t i = 0; i < bits.size(); ++i) {
      const std::size_t rank = i / share, row = i % share / held, v = i % held;
      out[row * c.vocab + rank * held + v] = __bfloat162float(bits[i]);
    }
    return out;
  };

  // Prefill: chunk k holds tokens k*chunk .. of every sequence that still has some.
  std::vector<std::vector<i32>> generated(static_cast<std::size_t>(B));
  std::vector<std::vector<float>> dumped(static_cast<std::size_t>(o.dump_logits));  // [step][b * vocab]
  for (auto& d : dumped) d.assign(std::size_t(B) * c.vocab, 0.0f);
  const auto prefill_start = Clock::now();
  for (int k = 0; k * o.chunk < longest; ++k) {
    std::vector<i32> tok, pos, seq, last(static_cast<std::size_t>(B), 0);
    std::vector<bool> ends(static_cast<std::size_t>(B), false);
    for (int b = 0; b < B; ++b) {
      const int length = int(prompts[std::size_t(b)].size());
      for (int p = k * o.chunk; p < std::min(length, (k + 1) * o.chunk); ++p) {
        if (p == length - 1) last[std::size_t(b)] = i32(tok.size()), ends[std::size_t(b)] = true;
        tok.push_back(prompts[std::size_t(b)][std::size_t(p)]);
        pos.push_back(p);
        seq.push_back(b);
      }
    }
    put(s.tokens, tok);
    put(s.positions, pos);
    put(s.seq_of_token, seq);
    put(s.last_index, last);
    const auto step = build(int(tok.size()), B, false);
    runtime.launch(step->g, stream.get());
    SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
    const std::vector<i32> next = get(s.next, std::size_t(B));
    const std::vector<float> logits = o.dump_logits > 0 ? logits_now(B) : std::vector<float>();
    for (int b = 0; b < B; ++b) {
      if (!ends[std::size_t(b)]) continue;
      generated[std::size_t(b)].push_back(next[std::size_t(b)]);
      if (o.dump_logits > 0) {
        std::copy_n(logits.begin() + std::size_t(b) * c.vocab, c.vocab, dumped[0].begin() + std::size_t(b) * c.vocab);
      }
    }
  }
  const double prefill_ms = ms_since(prefill_start);

  // Decode: each launch reads tokens[b] at positions[b] and leaves the next token and position.
  std::vector<i32> tok(static_cast<std::size_t>(B)), pos(static_cast<std::size_t>(B)), seq(static_cast<std::size_t>(B));
  for (int b = 0; b < B; ++b) {
    tok[std::size_t(b)] = generated[std::size_t(b)][0];
    pos[std::size_t(b)] = i32(prompts[std::size_t(b)].size());
    seq[std::size_t(b)] = b;
  }
  put(s.tokens, tok);
  put(s.positions, pos);
  put(s.seq_of_token, seq);
  const auto step = build(B, B, true);
  std::vector<double> latency;
  for (int i = 1; i < o.generate; ++i) {
    SAMPLE_CHECK(cudaMemcpyAsync(sample_step.get(), &i, sizeof i, cudaMemcpyHostToDevice, stream.get()));
    const auto t = Clock::now();
    runtime.launch(step->g, stream.get());
    SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
    latency.push_back(ms_since(t));
    const std::vector<i32> next = get(s.tokens, std::size_t(B));
    for (int b = 0; b < B; ++b) generated[std::size_t(b)].push_back(next[std::size_t(b)]);
    if (i < o.dump_logits) dumped[std::size_t(i)] = logits_now(B);
  }
  std::sort(latency.begin(), latency.end());
  const double p50 = latency.empty() ? 0.0 : latency[latency.size() / 2];
  std::printf("prefill of %d sequences (%d tokens at most, chunks of %d): %.2f ms\n", B, longest, o.chunk, prefill_ms);
  std::printf("decode: %d steps of batch %d, %.3f ms a step (p50, launch to result on the host), %.0f tokens/s\n",
              o.generate - 1, B, p50, p50 > 0 ? B * 1000.0 / p50 : 0.0);
  for (int b = 0; b < std::min(B, 2); ++b) {
    std::printf("sequence %d:", b);
    for (int i = 0; i < std::min<int>(16, int(generated[std::size_t(b)].size())); ++i) {
      std::printf(" %d", generated[std::size_t(b)][std::size_t(i)]);
    }
    std::printf(" ...\n");
  }

  if (!o.dump.empty() && (tp == nullptr || tp->rank == 0)) {  // every rank makes the same tokens: rank 0 writes
    nlohmann::json j;
    j["prompts"] = prompts;
    j["generated"] = generated;
    j["logits_steps"] = o.dump_logits;
    std::ofstream(o.dump + "/generation.json") << j.dump();
    std::vector<float> all;
    for (const auto& d : dumped) all.insert(all.end(), d.begin(), d.end());
    write_npy(o.dump + "/logits.npy", all, {std::size_t(o.dump_logits), std::size_t(B), std::size_t(c.vocab)});
    std::printf("wrote %s/generation.json and logits.npy\n", o.dump.c_str());
  }

  if (!o.check) return true;
  if (!m.host) throw std::runtime_error("--check needs the weights on the host");
  // The host reference, fed the same tokens: logits of the dumped steps compared; each token
  // compared where the reference's top two logits differ by more than the tolerance.
  HostDecoder host(c, *m.host);
  double worst = 0, scale = 0;
  int mismatched = 0, compared = 0, ties = 0;
  for (int b = 0; b < B; ++b) {
    std::vector<float> logits;
    for (const i32 t : prompts[std::size_t(b)]) logits = host.forward(b, t);
    const auto& gen = generated[std::size_t(b)];
    for (std::size_t i = 0; i < gen.size(); ++i) {
      if (int(i) < o.dump_logits) {
        for (int v = 0; v < c.vocab; ++v) {
          const float got = dumped[i][std::size_t(b) * c.vocab + std::size_t(v)];
          worst = std::max(worst, double(std::fabs(got - logits[std::size_t(v)])));
          scale = std::max(scale, double(std::fabs(logits[std::size_t(v)])));
        }
      }
      std::vector<float> sorted = logits;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      const int want = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (o.temperature <= 0.0f) {
        if (sorted[0] - sorted[1] > 0.02f * std::max(1.0f, std::fabs(sorted[0]))) {
          ++compared;
          mismatched += want != gen[i];
        } else {
          ++ties;
        }
      }
      if (i + 1 < gen.size()) logits = host.forward(b, gen[i]);
    }
  }
  const bool logits_ok = worst <= 0.02 * std::max(1.0, scale);
  std::printf("check: logits of %d steps within %.4f of the host reference (largest logit %.3f): %s\n", o.dump_logits,
              worst, scale, logits_ok ? "ok" : "FAILED");
  if (o.temperature <= 0.0f) {
    std::printf("check: %d of %d greedy tokens differ from the host reference (%d near-ties not compared): %s\n",
                mismatched, compared, ties, mismatched == 0 ? "ok" : "FAILED");
  }
  return logits_ok && mismatched == 0;
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
  return out;
}

/// Device-to-device copy bandwidth (bytes read and written) of a 1 GiB buffer, in TB/s.
double copy_bandwidth(cudaStream_t stream) {
  const std::size_t bytes = std::size_t{1} << 30;
  DeviceArray<std::uint8_t> a(bytes), b(bytes);
  SAMPLE_CHECK(cudaMemset(a.get(), 1, bytes));
  auto start = flowdsl::make_event(), stop = flowdsl::make_event();
  for (int i = 0; i < 3; ++i) SAMPLE_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream));
  SAMPLE_CHECK(cudaEventRecord(start.get(), stream));
  constexpr int copies = 20;
  for (int i = 0; i < copies; ++i) SAMPLE_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream));
  SAMPLE_CHECK(cudaEventRecord(stop.get(), stream));
  SAMPLE_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0;
  SAMPLE_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return 2.0 * double(bytes) * copies / (double(ms) * 1e-3) / 1e12;
}

/// GPU time a launch of `step`, over `steps` launches back to back, `runs` times.
std::vector<double> time_steps(flowdsl::Runtime& runtime, const Step& step, cudaStream_t stream, int steps, int runs,
                               const std::function<void()>& reset) {
  auto start = flowdsl::make_event(), stop = flowdsl::make_event();
  std::vector<double> out;
  for (int r = 0; r < runs; ++r) {
    reset();
    for (int i = 0; i < 3; ++i) runtime.launch(step.g, stream);
    SAMPLE_CHECK(cudaEventRecord(start.get(), stream));
    for (int i = 0; i < steps; ++i) runtime.launch(step.g, stream);
    SAMPLE_CHECK(cudaEventRecord(stop.get(), stream));
    SAMPLE_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    SAMPLE_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    out.push_back(double(ms) / steps);
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// Where a step's GPU time goes: `launches` launches under CUPTI (flowdsl::Profiler), each node's
/// median time summed by its role (its name without the "layerN." prefix), largest first.
void profile_step(flowdsl::Runtime& runtime, const Step& step, cudaStream_t stream, int launches,
                  const std::string& title, nlohmann::json& out) {
  flowdsl::Profiler profiler(runtime);
  for (int i = 0; i < launches; ++i) profiler.launch(step.g, stream);
  const flowdsl::Profile& profile = profiler.collect();
  const flowdsl::GraphStatistics stats = flowdsl::statistics(profile, 0);
  struct Role {
    int nodes = 0;
    double us = 0;
  };
  std::map<std::string, Role> roles;
  double total = 0;
  for (std::size_t i = 0; i < stats.nodes.size(); ++i) {
    if (!stats.nodes[i].measured) continue;
    std::string role = profile.graphs[0].nodes[i].path;
    if (role.rfind("layer", 0) == 0 && role.find('.') != std::string::npos) role = role.substr(role.find('.') + 1);
    roles[role].nodes += 1;
    roles[role].us += stats.nodes[i].median_us;
    total += stats.nodes[i].median_us;
  }
  std::vector<double> span, idle;
  for (const auto& l : stats.launches) {
    if (l.launch == 0) continue;  // the first launch instantiates
    span.push_back(l.gpu_span_us);
    idle.push_back(l.idle_us);
  }
  std::sort(span.begin(), span.end());
  std::sort(idle.begin(), idle.end());
  const double span_us = span.empty() ? 0 : span[span.size() / 2], idle_us = idle.empty() ? 0 : idle[idle.size() / 2];
  std::printf("profile %s: GPU span %.1f us, nodes %.1f us, idle %.1f us (medians of %d launches)\n", title.c_str(),
              span_us, total, idle_us, launches - 1);
  std::vector<std::pair<std::string, Role>> sorted(roles.begin(), roles.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  nlohmann::json table;
  for (const auto& [role, r] : sorted) {
    std::printf("  %-18s %4d nodes %9.1f us %5.1f%%  %8.2f us a node\n", role.c_str(), r.nodes, r.us,
                100.0 * r.us / std::max(total, 1e-9), r.us / r.nodes);
    table[role] = {{"nodes", r.nodes}, {"us", r.us}};
  }
  out = {{"gpu_span_us", span_us}, {"node_sum_us", total}, {"idle_us", idle_us}, {"roles", table}};
}

/// Decode steps of every batch in --batches at --context, each linear kind, with and without
/// programmatic edges; the prefill chunk; the HBM floor.
void bench(const Options& o, const Model& m, double read_ms, const Parallel* tp) {
  const Config& c = m.config;
  auto stream = flowdsl::make_stream();
  const double tb_s = copy_bandwidth(stream.get());
  const double floor_ms = double(m.bytes_per_step) / (tb_s * 1e12) * 1e3;
  cudaDeviceProp prop{};
  SAMPLE_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s: copy %.2f TB/s; a step reads %.3f GB of weights: floor %.3f ms\n", prop.name, tb_s,
              double(m.bytes_per_step) / 1e9, floor_ms);
  nlohmann::json out;
  out["device"] = prop.name;
  out["copy_tb_s"] = tb_s;
  out["bytes_per_step"] = m.bytes_per_step;
  out["floor_ms"] = floor_ms;
  out["weights_read_ms"] = read_ms;
  out["context"] = o.context;
  flowdsl::Runtime runtime;
  for (const int B : parse_list(o.batches)) {
    const int capacity = o.context + (o.steps + 3) * o.runs + o.profile + 8;
    State s(c, B, B, capacity, o.page_size, o.seed);
    std::vector<i32> tok(static_cast<std::size_t>(B)), pos(static_cast<std::size_t>(B), o.context), seq(static_cast<std::size_t>(B));
    std::mt19937 rng(o.seed + unsigned(B));
    for (int b = 0; b < B; ++b) tok[std::size_t(b)] = std::uniform_int_distribution<int>(0, c.vocab - 1)(rng), seq[std::size_t(b)] = b;
    put(s.tokens, tok);
    put(s.seq_of_token, seq);
    const auto reset = [&] { put(s.positions, pos); };
    nlohmann::json row;
    std::pair<LinearKind, bool> best{LinearKind::gemv, false};
    double best_ms = 1e30;
    for (const LinearKind kind : {LinearKind::gemv, LinearKind::cublaslt}) {
      for (const bool programmatic : {false, true}) {
        reset();
        const auto t0 = Clock::now();
        auto step = build_step(m, s, B, B, true, kind, 0.0f, 0, 1.0f, o.seed, nullptr, tp);
        step->g.programmatic_edges(programmatic);
        const double declare_ms = ms_since(t0);
        const auto t1 = Clock::now();
        runtime.launch(step->g, stream.get());
        SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
        const double first_ms = ms_since(t1);
        const std::vector<double> ms = time_steps(runtime, *step, stream.get(), o.steps, o.runs, reset);
        const std::string key = std::string(kind == LinearKind::gemv ? "gemv" : "cublaslt") +
                                (programmatic ? "_programmatic" : "");
        row[key] = {{"ms", ms}, {"median_ms", median(ms)}, {"declare_ms", declare_ms}, {"first_launch_ms", first_ms}};
        if (median(ms) < best_ms) best_ms = median(ms), best = {kind, programmatic};
        std::printf("batch %3d  %-22s %.3f ms a step (%.2fx the floor; runs:", B, key.c_str(), median(ms),
                    median(ms) / floor_ms);
        for (const double v : ms) std::printf(" %.3f", v);
        std::printf("); declared in %.2f ms, first launch (instantiation) %.2f ms\n", declare_ms, first_ms);
      }
    }
    if (o.profile > 1) {
      reset();
      auto step = build_step(m, s, B, B, true, best.first, 0.0f, 0, 1.0f, o.seed, nullptr, tp);
      step->g.programmatic_edges(best.second);
      const std::string title = "batch " + std::to_string(B) + " (" +
                                (best.first == LinearKind::gemv ? "gemv" : "cublaslt") +
                                (best.second ? ", programmatic" : "") + ")";
      profile_step(runtime, *step, stream.get(), o.profile, title, row["profile"]);
    }
    out["batches"][std::to_string(B)] = row;
  }
  // A chunk of prefill: prefill_seqs sequences, prefill_chunk tokens each, at --context.
  {
    const int S = o.prefill_seqs, C = o.prefill_chunk, T = S * C;
    State s(c, S, T, o.context + C + 8, o.page_size, o.seed);
    std::vector<i32> tok(static_cast<std::size_t>(T)), pos(static_cast<std::size_t>(T)), seq(static_cast<std::size_t>(T)), last(static_cast<std::size_t>(S));
    std::mt19937 rng(o.seed);
    for (int t = 0; t < T; ++t) {
      tok[std::size_t(t)] = std::uniform_int_distribution<int>(0, c.vocab - 1)(rng);
      pos[std::size_t(t)] = o.context + t % C;
      seq[std::size_t(t)] = t / C;
    }
    for (int b = 0; b < S; ++b) last[std::size_t(b)] = b * C + C - 1;
    put(s.tokens, tok);
    put(s.positions, pos);
    put(s.seq_of_token, seq);
    put(s.last_index, last);
    nlohmann::json row;
    for (const LinearKind kind : {LinearKind::gemv, LinearKind::cublaslt}) {
      if (kind == LinearKind::gemv && T > 64) continue;  // the matrix-vector kernel is not for 512 rows
      auto step = build_step(m, s, T, S, false, kind, 0.0f, 0, 1.0f, o.seed, nullptr, tp);
      step->g.programmatic_edges(true);
      runtime.launch(step->g, stream.get());
      SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
      const std::vector<double> ms = time_steps(runtime, *step, stream.get(), std::max(10, o.steps / 5), o.runs, [] {});
      const std::string key = kind == LinearKind::gemv ? "gemv" : "cublaslt";
      row[key] = {{"ms", ms}, {"median_ms", median(ms)}};
      std::printf("prefill chunk: %d sequences x %d tokens  %-10s %.3f ms\n", S, C, key.c_str(), median(ms));
      if (o.profile > 1 && kind == LinearKind::cublaslt) {
        profile_step(runtime, *step, stream.get(), o.profile, "prefill chunk (" + key + ")", row["profile"]);
      }
    }
    out["prefill"] = row;
  }
  if (!o.json_path.empty() && (tp == nullptr || tp->rank == 0)) std::ofstream(o.json_path) << out.dump(1);
}

/// The family's buckets as one executable holding a SWITCH that condition_bucket steers from the
/// batch on the device: made ready (timed, its device memory), each bucket's tokens after one
/// step checked equal to the family's, each bucket's step timed.
void compare_switch(const Options& o, const Model& m, State& s, flowdsl::Family& family, flowdsl::Runtime& runtime,
                    cudaStream_t stream, const std::function<void()>& reset, nlohmann::json& out) {
  try {
    DeviceArray<i32> count(1);
    put(count, std::vector<i32>{1});
    flowdsl::Graph sw = build_switch(m, s, family.buckets(), count.get(), [&](int b) { return pick(o, b); });
    sw.programmatic_edges(o.programmatic);
    const auto t0 = Clock::now();
    runtime.prepare(sw, stream);
    SAMPLE_CHECK(cudaStreamSynchronize(stream));
    const double ready_ms = ms_since(t0);
    std::uint64_t bytes = 0;
    runtime.inspect_executable(sw, [&](const flowdsl::Executable& e) { bytes = e.device_memory(); });
    std::printf("SWITCH over the same buckets, one executable: ready in %.2f ms, %.2f MiB\n", ready_ms,
                double(bytes) / (1024.0 * 1024.0));
    out["ready_ms"] = ready_ms;
    out["executable_bytes"] = bytes;
    auto start = flowdsl::make_event(), stop = flowdsl::make_event();
    for (const int b : family.buckets()) {
      put(count, std::vector<i32>{b});
      reset();
      family.launch(b, stream);
      SAMPLE_CHECK(cudaStreamSynchronize(stream));
      const std::vector<i32> want = get(s.tokens, std::size_t(b));
      reset();
      runtime.launch(sw, stream);
      SAMPLE_CHECK(cudaStreamSynchronize(stream));
      const std::vector<i32> got = get(s.tokens, std::size_t(b));
      std::vector<double> ms;
      for (int r = 0; r < o.runs; ++r) {
        reset();
        for (int i = 0; i < 3; ++i) runtime.launch(sw, stream);
        SAMPLE_CHECK(cudaEventRecord(start.get(), stream));
        for (int i = 0; i < o.steps; ++i) runtime.launch(sw, stream);
        SAMPLE_CHECK(cudaEventRecord(stop.get(), stream));
        SAMPLE_CHECK(cudaEventSynchronize(stop.get()));
        float elapsed = 0;
        SAMPLE_CHECK(cudaEventElapsedTime(&elapsed, start.get(), stop.get()));
        ms.push_back(double(elapsed) / o.steps);
      }
      std::printf("SWITCH bucket %3d: %.3f ms a step; tokens %s the family's\n", b, median(ms),
                  got == want ? "equal" : "DIFFER from");
      out["per_bucket"][std::to_string(b)] = {{"ms", ms}, {"median_ms", median(ms)}, {"tokens_equal", got == want}};
    }
  } catch (const std::exception& e) {
    std::printf("SWITCH over the buckets: %s\n", e.what());
    out["error"] = e.what();
  }
}

std::size_t free_device_bytes() {
  std::size_t free = 0, total = 0;
  SAMPLE_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

/// The decode step as a flowdsl::Family over the buckets 1, 2, 4, ... --family, every bucket on
/// one State sized for the largest: built and made ready up front, each phase timed; the device
/// memory of each executable, of the family, and of the activations they share (the weights and
/// the KV cache aside); then each bucket's step timed through the family.
void bench_family(const Options& o, const Model& m) {
  const Config& c = m.config;
  auto stream = flowdsl::make_stream();
  const std::vector<int> buckets = flowdsl::Family::powers_of_two(o.family);
  const int largest = buckets.back();
  const int capacity = o.context + (o.steps + 3) * o.runs + 8;
  State s(c, largest, largest, capacity, o.page_size, o.seed);
  std::vector<i32> tok(static_cast<std::size_t>(largest)), pos(static_cast<std::size_t>(largest), o.context),
      seq(static_cast<std::size_t>(largest));
  std::mt19937 rng(o.seed);
  for (int b = 0; b < largest; ++b) {
    tok[std::size_t(b)] = std::uniform_int_distribution<int>(0, c.vocab - 1)(rng);
    seq[std::size_t(b)] = b;
  }
  put(s.seq_of_token, seq);
  const auto reset = [&] {
    put(s.tokens, tok);
    put(s.positions, pos);
  };
  reset();
  SAMPLE_CHECK(cudaDeviceSynchronize());

  flowdsl::RuntimeOptions options;
  options.capacity = std::max<std::size_t>(options.capacity, 2 * buckets.size());
  flowdsl::Runtime runtime(options);
  flowdsl::Family family(runtime, buckets, [&](int b) {
    flowdsl::Graph g = std::move(build_step(m, s, b, b, true, pick(o, b), 0.0f, 0, 1.0f, o.seed, nullptr)->g);
    g.programmatic_edges(o.programmatic);
    return g;
  });
  const std::size_t free_before = free_device_bytes();
  const auto t0 = Clock::now();
  family.prepare(stream.get());
  SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
  const double ready_ms = ms_since(t0);
  const std::size_t took = free_before - std::min(free_before, free_device_bytes());
  const flowdsl::FamilyStatistics fs = family.statistics();
  const double activations = double(s.activation_bytes());
  const double mib = 1024.0 * 1024.0;
  double build_ms = 0, instantiate_ms = 0;
  for (const auto& b : fs.buckets) build_ms += b.build_ms, instantiate_ms += b.instantiate_ms;
  std::printf("family of %zu buckets (1 .. %d, %s%s): ready in %.2f ms (built %.2f, instantiated and uploaded %.2f)\n",
              buckets.size(), largest, o.linear.c_str(), o.programmatic ? ", programmatic" : "", ready_ms, build_ms,
              instantiate_ms);
  std::printf("device memory beyond weights and KV cache: activations %.1f MiB (shared), executables %.1f MiB "
              "(the largest %.1f MiB); family %.1f MiB = %.3fx its largest bucket alone; device free memory fell "
              "by %.1f MiB\n",
              activations / mib, double(fs.device_memory) / mib, double(fs.largest_device_memory) / mib,
              (activations + double(fs.device_memory)) / mib,
              (activations + double(fs.device_memory)) / (activations + double(fs.largest_device_memory)),
              double(took) / mib);
  nlohmann::json out;
  out["buckets"] = buckets;
  out["ready_ms"] = ready_ms;
  out["build_ms"] = build_ms;
  out["instantiate_ms"] = instantiate_ms;
  out["activation_bytes"] = s.activation_bytes();
  out["executable_bytes"] = fs.device_memory;
  out["largest_executable_bytes"] = fs.largest_device_memory;
  out["free_memory_drop_bytes"] = took;
  auto start = flowdsl::make_event(), stop = flowdsl::make_event();
  for (const auto& b : fs.buckets) {
    std::vector<double> ms;
    for (int r = 0; r < o.runs; ++r) {
      reset();
      for (int i = 0; i < 3; ++i) family.launch(b.bucket, stream.get());
      SAMPLE_CHECK(cudaEventRecord(start.get(), stream.get()));
      for (int i = 0; i < o.steps; ++i) family.launch(b.bucket, stream.get());
      SAMPLE_CHECK(cudaEventRecord(stop.get(), stream.get()));
      SAMPLE_CHECK(cudaEventSynchronize(stop.get()));
      float elapsed = 0;
      SAMPLE_CHECK(cudaEventElapsedTime(&elapsed, start.get(), stop.get()));
      ms.push_back(double(elapsed) / o.steps);
    }
    std::printf("bucket %3d: built %.2f ms, instantiated %.2f ms, executable %.2f MiB, %.3f ms a step\n", b.bucket,
                b.build_ms, b.instantiate_ms, double(b.device_memory) / mib, median(ms));
    out["per_bucket"][std::to_string(b.bucket)] = {{"build_ms", b.build_ms},
                                                   {"instantiate_ms", b.instantiate_ms},
                                                   {"executable_bytes", b.device_memory},
                                                   {"ms", ms},
                                                   {"median_ms", median(ms)}};
  }
  if ((largest & (largest - 1)) == 0) compare_switch(o, m, s, family, runtime, stream.get(), reset, out["switch"]);
  const flowdsl::RuntimeStatistics rs = runtime.statistics();
  std::printf("runtime: %llu launches, %llu instantiations (%llu up front), %llu node updates\n",
              static_cast<unsigned long long>(rs.launches), static_cast<unsigned long long>(rs.misses),
              static_cast<unsigned long long>(rs.prepared), static_cast<unsigned long long>(rs.node_updates));
  if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(1);
}

/// What a decode loop launch should write for sequence b: the tokens the host's launches made,
/// up to its limit and its first end token (included), then -1.
std::vector<i32> expected_loop_out(const std::vector<std::vector<i32>>& made, const std::vector<i32>& limit, i32 end_token,
                                   int steps) {
  const std::size_t batch = limit.size();
  std::vector<i32> out(batch * std::size_t(steps), -1);
  for (std::size_t b = 0; b < batch; ++b) {
    for (int i = 0; i < std::min(steps, limit[b]); ++i) {
      const i32 token = made[std::size_t(i)][b];
      out[b * std::size_t(steps) + std::size_t(i)] = token;
      if (token == end_token) break;
    }
  }
  return out;
}

/// --loop N at each of --batches: N decode steps launched one by one from the host, then as one
/// launch of a loop on the device; the loop's tokens must equal the host launches', also with an
/// end token and per-sequence length limits. Times both (GPU time a step, host time a launch).
bool bench_loop(const Options& o, const Model& m) {
  const Config& c = m.config;
  const int N = o.loop;
  auto stream = flowdsl::make_stream();
  flowdsl::Runtime runtime;
  auto start = flowdsl::make_event(), stop = flowdsl::make_event();
  nlohmann::json out;
  bool ok = true;
  for (const int B : parse_list(o.batches)) {
    State s(c, B, B, o.context + N + 8, o.page_size, o.seed);
    LoopState l(B, N);
    const auto rows = static_cast<std::size_t>(B);
    std::vector<i32> tok(rows), pos(rows, o.context), seq(rows);
    std::mt19937 rng(o.seed + unsigned(B));
    for (int b = 0; b < B; ++b) tok[std::size_t(b)] = std::uniform_int_distribution<int>(0, c.vocab - 1)(rng), seq[std::size_t(b)] = b;
    put(s.seq_of_token, seq);
    const std::vector<i32> all_steps(rows, N);
    const auto reset = [&](const std::vector<i32>& remaining) {
      put(s.tokens, tok);
      put(s.positions, pos);
      put(l.remaining, remaining);
      SAMPLE_CHECK(cudaDeviceSynchronize());
    };
    const LinearKind kind = pick(o, B);
    auto step = build_step(m, s, B, B, true, kind, 0.0f, 0, 1.0f, o.seed, nullptr);
    step->g.programmatic_edges(o.programmatic);

    // The host's launches, each step's tokens read back: what the loop must make.
    reset(all_steps);
    std::vector<std::vector<i32>> made;
    for (int i = 0; i < N; ++i) {
      runtime.launch(step->g, stream.get());
      SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
      made.push_back(get(s.tokens, std::size_t(B)));
    }
    // The loop, as many steps, then with an end token (the token sequence 0 made halfway) and
    // limits of 1 .. N tokens.
    std::vector<i32> limits(rows);
    for (int b = 0; b < B; ++b) limits[std::size_t(b)] = 1 + (b * 7) % N;
    const i32 end_token = made[std::size_t(N / 2)][0];
    struct Case {
      const char* what;
      i32 end;
      const std::vector<i32>* remaining;
    };
    nlohmann::json row;
    for (const Case& k : {Case{"all steps", -1, &all_steps}, Case{"end token and limits", end_token, &limits}}) {
      flowdsl::Graph loop = build_loop(m, s, l, B, N, k.end, kind);
      loop.programmatic_edges(o.programmatic);
      reset(*k.remaining);
      put(l.out, std::vector<i32>(std::size_t(B) * std::size_t(N), -2));
      runtime.launch(loop, stream.get());
      SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
      const std::vector<i32> want = expected_loop_out(made, *k.remaining, k.end, N);
      const std::vector<i32> got = get(l.out, want.size());
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < want.size(); ++i) wrong += got[i] != want[i];
      std::printf("batch %3d, loop of %d steps (%s): %zu of %zu tokens differ from the host launches'\n", B, N, k.what,
                  wrong, want.size());
      row["check"][k.what] = wrong;
      ok = ok && wrong == 0;
      if (k.end >= 0) continue;

      // Timed: N host launches against one launch of the loop, `runs` times each.
      std::vector<double> host_gpu, host_cpu, loop_gpu, loop_cpu;
      for (int r = 0; r < o.runs; ++r) {
        reset(all_steps);
        SAMPLE_CHECK(cudaEventRecord(start.get(), stream.get()));
        auto t0 = Clock::now();
        for (int i = 0; i < N; ++i) runtime.launch(step->g, stream.get());
        host_cpu.push_back(ms_since(t0) * 1e3 / N);
        SAMPLE_CHECK(cudaEventRecord(stop.get(), stream.get()));
        SAMPLE_CHECK(cudaEventSynchronize(stop.get()));
        float ms = 0;
        SAMPLE_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
        host_gpu.push_back(double(ms) / N);

        reset(all_steps);
        SAMPLE_CHECK(cudaEventRecord(start.get(), stream.get()));
        t0 = Clock::now();
        runtime.launch(loop, stream.get());
        loop_cpu.push_back(ms_since(t0) * 1e3 / N);
        SAMPLE_CHECK(cudaEventRecord(stop.get(), stream.get()));
        SAMPLE_CHECK(cudaEventSynchronize(stop.get()));
        SAMPLE_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
        loop_gpu.push_back(double(ms) / N);
      }
      const double tokens_host = B / median(host_gpu) * 1e3, tokens_loop = B / median(loop_gpu) * 1e3;
      std::printf("batch %3d, %d steps: host launches %.3f ms a step (%.0f tokens/s), host CPU %.2f us a launch; "
                  "device loop %.3f ms a step (%.0f tokens/s, %.3fx), host CPU %.3f us a step (%.4f us a token)\n",
                  B, N, median(host_gpu), tokens_host, median(host_cpu), median(loop_gpu), tokens_loop,
                  tokens_loop / tokens_host, median(loop_cpu), median(loop_cpu) / B);
      row["host"] = {{"gpu_ms_per_step", host_gpu}, {"cpu_us_per_launch", host_cpu}};
      row["loop"] = {{"gpu_ms_per_step", loop_gpu}, {"cpu_us_per_step", loop_cpu}};
    }
    out["batches"][std::to_string(B)] = row;
  }
  out["steps"] = N;
  if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(1);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Llama decoding on flowdsl graphs: prefill by chunks, decode greedily or by sampling"};
  app.add_option("--model", o.model, "checkpoint folder (config.json, model.safetensors); default: a random tiny model");
  app.add_option("--batch", o.batch, "sequences generated at once");
  app.add_option("--prompt", o.prompt, "prompt length at most (random lengths from half of it)");
  app.add_option("--generate", o.generate, "tokens generated a sequence");
  app.add_option("--chunk", o.chunk, "prompt tokens a sequence a prefill launch");
  app.add_option("--page-size", o.page_size, "tokens a page of the KV cache");
  app.add_option("--linear", o.linear, "projections: gemv (flowdsl's), cublaslt, or auto")
      ->check(CLI::IsMember({"auto", "gemv", "cublaslt"}));
  app.add_option("--gemv-max", o.gemv_max, "auto: the matrix-vector kernel up to this many rows");
  app.add_flag("--programmatic,!--no-programmatic", o.programmatic,
               "programmatic edges between kernels, each launched early (the bench times both)");
  app.add_option("--temperature", o.temperature, "0: greedy; above: sampling (top-k, top-p)");
  app.add_option("--top-k", o.top_k, "sampling: the k most likely tokens (0: all)");
  app.add_option("--top-p", o.top_p, "sampling: the smallest set of this much probability");
  app.add_option("--seed", o.seed, "prompts, pages, random model and sampler");
  app.add_flag("--check", o.check, "compare with a host reference of the model (small models)");
  app.add_option("--dump", o.dump, "folder for generation.json and logits.npy (scripts/check_llama_hf.py)");
  app.add_option("--dump-logits", o.dump_logits, "steps whose logits are dumped and checked (default: every step)");
  app.add_flag("--bench", o.bench, "time decode steps at --batches and a prefill chunk");
  app.add_option("--batches", o.batches, "bench: batch sizes");
  app.add_option("--context", o.context, "bench: positions already in every sequence's cache");
  app.add_option("--steps", o.steps, "bench: steps timed a run");
  app.add_option("--runs", o.runs, "bench: runs");
  app.add_option("--prefill-seqs", o.prefill_seqs, "bench: sequences of the prefill chunk");
  app.add_option("--prefill-chunk", o.prefill_chunk, "bench: tokens a sequence of the prefill chunk");
  app.add_option("--family", o.family,
                 "bench the decode step as a family of batch buckets 1, 2, 4, ... up to this: made ready up front "
                 "(timed by phase), device memory of each executable, each bucket's step");
  app.add_option("--loop", o.loop,
                 "bench this many decode steps in one launch (a WHILE on the device) beside as many launches from the "
                 "host, at each of --batches: tokens checked equal, end tokens and length limits, GPU and host time");
  app.add_option("--json", o.json_path, "bench: figures as JSON");
  app.add_option("--profile", o.profile,
                 "bench: profile this many launches of each batch's fastest step and of the prefill chunk (CUPTI), "
                 "time summed by node role");
  app.add_option("--write-graph", o.graph_folder,
                 "write the decode step of --batch sequences as a graph file (decode.json) into this folder, with "
                 "the tokens of --generate launches (needs --model); with --family, every bucket 1, 2, 4, ... in one "
                 "graph, a SWITCH picking the bucket of --batch (batch.npy)");
  app.add_option("--graph-position", o.graph_position, "--write-graph: the position the sequences start at");
#ifdef FLOWDSL_HAS_NCCL
  app.add_flag("--ranks", o.ranks,
               "tensor parallel over the ranks the launcher started (NCCL_NVLS_ENABLE=0 mpirun -np 2 llm_decode --ranks "
               "...; one process: one rank): heads, MLP columns and vocabulary split, two all-reduces a layer; greedy generation, "
               "--check and --bench");
#endif
  CLI11_PARSE(app, argc, argv);
  if (o.dump_logits < 0 || o.dump_logits > o.generate) o.dump_logits = o.generate;
  if (!sample::have_device()) return sample::skipped;
  try {
    fk::ensure_builtins();
#ifdef FLOWDSL_HAS_NCCL
    // The communicator first: it picks this rank's GPU. Rank 0 alone speaks.
    std::optional<flowdsl::nccl::Communicator> comm;
    if (o.ranks) {
      comm.emplace();
      if (comm->rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) return 1;
    }
#endif
    double read_ms = 0;
    Model m = o.model.empty() ? random_model(Config{}, o.seed, o.check) : load_model(o.model, o.check, read_ms);
    const Config& c = m.config;
    std::printf("model: %d layers, hidden %d, %d/%d heads of %d, MLP %d, vocabulary %d%s; %.2f GB of weights\n", c.layers,
                c.hidden, c.heads, c.kv_heads, c.head_dim, c.intermediate, c.vocab, c.tied ? " (tied)" : "",
                double(m.memory.bytes()) / 1e9);
    if (!o.graph_folder.empty()) {
      if (o.model.empty()) throw std::runtime_error("--write-graph needs --model (weights by safetensors reference)");
      write_graph(o.graph_folder, o.model, m, o.batch, o.generate, o.graph_position, o.page_size, o.programmatic,
                  o.family);
      return 0;
    }
    if (o.family > 0) {
      bench_family(o, m);
      return 0;
    }
    if (o.loop > 0) {
      return bench_loop(o, m) ? 0 : 1;
    }
    // This rank's part of the model and how its partial sums meet the other ranks'.
    Model part;
    Parallel tp;
    const Parallel* split = nullptr;
#ifdef FLOWDSL_HAS_NCCL
    if (comm) {
      if (!o.graph_folder.empty() || o.family > 0 || o.loop > 0 || o.temperature > 0.0f) {
        throw std::runtime_error("--ranks runs greedy generation, --check and --bench");
      }
      part = shard(m, comm->rank(), comm->size());
      tp.rank = comm->rank();
      tp.world = comm->size();
      tp.sum = [&](fk::Into g, const std::string& name, bf16* data, std::size_t count) -> flowdsl::NodeHandle {
        return flowdsl::nccl::all_reduce(g, name, *comm, data, data, count, ncclBfloat16, ncclSum);
      };
      tp.max = [&](fk::Into g, const std::string& name, std::uint64_t* keys, std::size_t count) -> flowdsl::NodeHandle {
        return flowdsl::nccl::all_reduce(g, name, *comm, keys, keys, count, ncclUint64, ncclMax);
      };
      tp.gather = [&](fk::Into g, const std::string& name, const bf16* send, bf16* recv,
                      std::size_t count) -> flowdsl::NodeHandle {
        return flowdsl::nccl::all_gather(g, name, *comm, send, recv, count, ncclBfloat16);
      };
      split = &tp;
      std::printf("tensor parallel over %d rank%s: %d/%d heads, %d MLP columns, %d tokens a rank; %.2f GB of weights "
                  "a rank\n",
                  tp.world, tp.world == 1 ? "" : "s", part.config.heads, part.config.kv_heads, part.config.intermediate,
                  part.vocab_rows, double(part.bytes_per_step) / 1e9);
    }
#endif
    const Model& graph_model = split != nullptr ? part : m;
    if (o.bench) {
      bench(o, graph_model, read_ms, split);
      return 0;
    }
    return generate(o, m, graph_model, split) ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llm_decode: %s\n", e.what());
    return 1;
  }
}

namespace {

void write_graph(const std::string& folder, const std::string& model_folder, const Model& m, int batch, int steps,
                 int position, int page_size, bool programmatic, int family) {
  const Config& c = m.config;
  // With a family: every bucket 1, 2, 4, ... `family` in one graph, a SWITCH picking the bucket
  // of count[0] (batch.npy), on buffers sized for the largest.
  const int rows = family > 0 ? family : batch;
  if (family > 0 && batch > family) throw std::runtime_error("--batch exceeds the largest bucket of --family");
  State s(c, rows, rows, position + steps + 1, page_size, 1);
  std::vector<i32> tok(static_cast<std::size_t>(rows)), pos(static_cast<std::size_t>(rows), position),
      seq(static_cast<std::size_t>(rows));
  for (int b = 0; b < rows; ++b) tok[std::size_t(b)] = (b * 7919 + 13) % c.vocab, seq[std::size_t(b)] = b;
  const std::vector<i32> table = get(s.block_table, s.block_table.size());
  put(s.tokens, tok);
  put(s.positions, pos);
  put(s.seq_of_token, seq);
  DeviceArray<i32> count(1);
  put(count, std::vector<i32>{batch});
  flowdsl::Graph g = family > 0 ? build_switch(m, s, flowdsl::Family::powers_of_two(family), count.get(),
                                               [](int) { return LinearKind::gemv; })
                                : std::move(build_step(m, s, batch, batch, true, LinearKind::gemv, 0.0f, 0, 1.0f, 0, nullptr)->g);
  g.programmatic_edges(programmatic);

  // Every pointer of the graph as a buffer: weights by tensor name, inputs from .npy files.
  std::vector<flowdsl::BufferSpec> buffers;
  flowdsl::BufferAddresses addresses;
  const std::string weights = std::filesystem::absolute(model_folder + "/model.safetensors").string();
  auto add = [&](const std::string& name, const void* at, flowdsl::ScalarType type, std::size_t count,
                 std::vector<std::string> tensors = {}, const std::string& npy = {}, bool output = false) {
    flowdsl::BufferSpec b;
    b.name = name;
    b.type = type;
    b.count = count;
    b.output = output;
    if (!tensors.empty()) {
      b.init.kind = flowdsl::BufferInit::Kind::safetensors;
      b.init.file = weights;
      b.init.tensors = std::move(tensors);
    } else if (!npy.empty()) {
      b.init.kind = flowdsl::BufferInit::Kind::npy;
      b.init.file = npy;
    }
    buffers.push_back(b);
    addresses[name] = const_cast<void*>(at);
  };
  using flowdsl::ScalarType;
  const std::size_t H = std::size_t(c.hidden);
  add("embed", m.embed, ScalarType::bf16, std::size_t(c.vocab) * H, {"model.embed_tokens.weight"});
  for (int l = 0; l < c.layers; ++l) {
    const auto& L = m.layers[std::size_t(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".", b = "l" + std::to_string(l) + ".";
    add(b + "input_norm", L.input_norm, ScalarType::bf16, H, {p + "input_layernorm.weight"});
    add(b + "qkv", L.qkv, ScalarType::bf16, std::size_t(c.qkv_out()) * H,
        {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"});
    add(b + "o", L.o, ScalarType::bf16, H * c.heads * c.head_dim, {p + "self_attn.o_proj.weight"});
    add(b + "post_norm", L.post_norm, ScalarType::bf16, H, {p + "post_attention_layernorm.weight"});
    add(b + "gate_up", L.gate_up, ScalarType::bf16, 2 * std::size_t(c.intermediate) * H,
        {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"});
    add(b + "down", L.down, ScalarType::bf16, H * c.intermediate, {p + "mlp.down_proj.weight"});
    add(b + "k_cache", s.k_cache[std::size_t(l)].get(), ScalarType::bf16, s.k_cache[std::size_t(l)].size());
    add(b + "v_cache", s.v_cache[std::size_t(l)].get(), ScalarType::bf16, s.v_cache[std::size_t(l)].size());
  }
  add("final_norm", m.final_norm, ScalarType::bf16, H, {"model.norm.weight"});
  if (!c.tied) add("lm_head", m.lm_head, ScalarType::bf16, std::size_t(c.vocab) * H, {"lm_head.weight"});
  add("tokens", s.tokens.get(), ScalarType::i32, s.tokens.size(), {}, "tokens.npy", true);
  add("positions", s.positions.get(), ScalarType::i32, s.positions.size(), {}, "positions.npy", true);
  add("seq_of_token", s.seq_of_token.get(), ScalarType::i32, s.seq_of_token.size(), {}, "seq_of_token.npy");
  add("block_table", s.block_table.get(), ScalarType::i32, s.block_table.size(), {}, "block_table.npy");
  add("inv_freq", s.inv_freq.get(), ScalarType::f32, s.inv_freq.size(), {}, "inv_freq.npy");
  add("workspace", s.workspace.get(), ScalarType::f32, s.workspace.size());
  for (auto [name, array] : {std::pair{"x", &s.x}, {"h", &s.h}, {"qkv", &s.qkv}, {"q", &s.q}, {"attn", &s.attn},
                             {"o", &s.o}, {"gate_up", &s.gate_up}, {"logits", &s.logits}}) {
    add(name, array->get(), ScalarType::bf16, array->size());
  }
  add("mlp", s.mlp.get(), ScalarType::bf16, s.mlp.size());
  if (family > 0) add("count", count.get(), ScalarType::i32, 1, {}, "batch.npy");
  const flowdsl::GraphSpec spec =
      flowdsl::describe_graph(g, family > 0 ? "llm_decode_family" : "llm_decode", buffers, addresses,
                              flowdsl::KernelRegistry::global());
  std::filesystem::create_directories(folder);
  std::ofstream(folder + "/decode.json") << flowdsl::to_json_text(spec);
  write_ints(folder + "/tokens.npy", tok);
  write_ints(folder + "/positions.npy", pos);
  write_ints(folder + "/seq_of_token.npy", seq);
  write_ints(folder + "/block_table.npy", table);
  write_npy(folder + "/inv_freq.npy", get(s.inv_freq, s.inv_freq.size()), {s.inv_freq.size()});
  if (family > 0) write_ints(folder + "/batch.npy", {batch});

  // The tokens the same graph makes in C++.
  auto stream = flowdsl::make_stream();
  flowdsl::Runtime runtime;
  for (int i = 0; i < steps; ++i) runtime.launch(g, stream.get());
  SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
  write_ints(folder + "/expected_tokens.npy", get(s.tokens, s.tokens.size()));
  std::printf("wrote %s/decode.json (%zu buffers, %zu nodes) and the tokens of %d launches, expected_tokens.npy\n",
              folder.c_str(), spec.buffers.size(), spec.nodes.size(), steps);
}

}  // namespace
