// SPDX-License-Identifier: Apache-2.0
// Serving an MLP to requests that arrive at random times with random lengths. Arrivals follow a
// Poisson process (drawn in advance, replayed against the steady clock); a batcher groups the
// waiting requests, up to a maximum batch in rows or a maximum wait, pads the batch to its
// bucket's fixed shape and launches that bucket's graph: upload -> cast to bfloat16 -> (matmul
// bf16 with float accumulation + bias + gelu, written in bf16)* -> matmul + bias -> softmax f32 ->
// download. The bf16 matrix products are cuBLASLt calls in library nodes (--gemm cublaslt, the
// default), or flowdsl's own matmul kernel on programmatic edges (--gemm builtin, whose graph
// has no copies: the cast reads the pinned staging input and the softmax writes the pinned output
// over the bus); bias + gelu are fused into the hidden layers' products either way. The GPU time of a batch is reported
// for both. Compared at several arrival
// rates, from light load to past saturation:
//   batch1         each request alone, one launch each (bf16, flowdsl graphs)
//   dynamic_graph  dynamic batching, flowdsl graphs (bf16)
//   dynamic_stream dynamic batching, the same nodes launched one by one (flowdsl::launch_eagerly)
//   dynamic_f32    dynamic batching, flowdsl graphs, float matmuls (no casts)
// Reports latency p50/p99 (arrival to completion seen by the host), throughput, padding waste
// and GPU busy time; checks sampled rows of the batches against a float64 host reference.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common.cuh"
#include "eager.cuh"
#include "flowdsl/cublaslt.hpp"
#include "flowdsl/kernels.hpp"
#include "reference.hpp"

namespace fk = flowdsl::kernels;

namespace {

using sample::DeviceArray;
using sample::PinnedArray;
using Clock = std::chrono::steady_clock;
using bf16 = __nv_bfloat16;

// ---------------------------------------------------------------- options ---------------------

struct Options {
  std::vector<int> layers{1024, 4096, 1024, 16};  // input width, hidden widths..., classes
  std::vector<int> buckets{16, 32, 64, 128};      // padded batch shapes, in rows
  int max_batch = 0;                              // rows; 0: the largest bucket
  int min_rows = 1, max_rows = 16;                // rows per request, uniform
  double max_wait_us = 100;                       // launch once the oldest request waited this long
  int in_flight = 2;                              // batches launched and not yet seen complete
  std::vector<double> rates;                      // requests/s; empty: loads x capacity estimate
  // Light load to past saturation. batch1 saturates near mean rows / max batch of the capacity
  // when a small bucket costs about as much GPU time as the largest (one tile of rows).
  std::vector<double> loads{0.02, 0.05, 0.2, 0.5, 0.8, 1.2};
  double duration_s = 0.5;                        // of arrivals per configuration
  int min_requests = 400, max_requests = 200000;  // per configuration
  double drain_s = 0.25;                          // after the last arrival, then the rest is unserved
  int check_every = 64;                           // batches; besides each bucket's first
  int pool_rows = 256;                            // distinct input rows the requests draw from
  std::vector<std::string> modes{"batch1", "dynamic_graph", "dynamic_stream", "dynamic_f32"};
  std::string gemm = "cublaslt";                  // the bf16 modes' matrix products: cublaslt or builtin
  unsigned seed = 1;
  bool quick = false;
  std::string json_path;
};

/// Reads the options; returns the exit code when the program should stop (help, bad options).
std::optional<int> parse_options(int argc, char** argv, Options& o) {
  CLI::App app{"serving: dynamic batching of a bf16 MLP with flowdsl graphs, under Poisson arrivals"};
  app.add_flag("--quick", o.quick, "smoke run: 2 loads, 100 requests each, small pool (ctest)");
  app.add_option("--json", o.json_path, "write every figure, the options and the device to FILE");
  app.add_option("--layers", o.layers, "widths: input, hidden..., classes")->delimiter(',');
  app.add_option("--buckets", o.buckets, "padded batch shapes in rows, ascending")->delimiter(',');
  app.add_option("--max-batch", o.max_batch, "rows a batch holds at most (default: the largest bucket)");
  app.add_option("--min-rows", o.min_rows, "fewest rows of a request")->check(CLI::PositiveNumber);
  app.add_option("--max-rows", o.max_rows, "most rows of a request")->check(CLI::PositiveNumber);
  app.add_option("--max-wait-us", o.max_wait_us, "launch once the oldest waiting request has waited this long")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--in-flight", o.in_flight, "batches launched and not yet seen complete")->check(CLI::Range(1, 16));
  app.add_option("--rates", o.rates, "arrival rates in requests/s (replaces --loads)")->delimiter(',');
  app.add_option("--loads", o.loads, "arrival rates as fractions of the estimated capacity")->delimiter(',');
  app.add_option("--duration", o.duration_s, "seconds of arrivals per configuration")->check(CLI::PositiveNumber);
  app.add_option("--min-requests", o.min_requests, "requests per configuration at least")->check(CLI::PositiveNumber);
  app.add_option("--max-requests", o.max_requests, "requests per configuration at most")->check(CLI::PositiveNumber);
  app.add_option("--drain", o.drain_s, "seconds allowed after the last arrival; what is left is unserved")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--check-every", o.check_every, "check every Nth batch (and each bucket's first)")
      ->check(CLI::PositiveNumber);
  app.add_option("--pool-rows", o.pool_rows, "distinct input rows requests are drawn from")->check(CLI::PositiveNumber);
  app.add_option("--modes", o.modes, "batch1, dynamic_graph, dynamic_stream, dynamic_f32")
      ->delimiter(',')
      ->check(CLI::IsMember({"batch1", "dynamic_graph", "dynamic_stream", "dynamic_f32"}));
  app.add_option("--gemm", o.gemm, "matrix products of the bf16 modes: cublaslt (library nodes) or builtin (flowdsl's kernel)")
      ->check(CLI::IsMember({"cublaslt", "builtin"}));
  app.add_option("--seed", o.seed, "seed of weights, inputs and arrivals");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (o.quick) {
    // Explicit options still win over what --quick implies.
    if (app.count("--loads") == 0) o.loads = {0.3, 1.2};
    if (app.count("--min-requests") == 0) o.min_requests = 100;
    if (app.count("--max-requests") == 0) o.max_requests = 100;
    if (app.count("--drain") == 0) o.drain_s = 0.2;
    if (app.count("--check-every") == 0) o.check_every = 8;
    if (app.count("--pool-rows") == 0) o.pool_rows = 64;
  }
  if (o.max_batch == 0 && !o.buckets.empty()) o.max_batch = *std::max_element(o.buckets.begin(), o.buckets.end());
  std::vector<std::string> problems;
  if (o.buckets.empty() || !std::is_sorted(o.buckets.begin(), o.buckets.end()) || o.buckets.front() < 1)
    problems.push_back("--buckets must be positive and ascending");
  else if (o.max_batch < 1 || o.max_batch > o.buckets.back())
    problems.push_back("--max-batch must lie in [1, the largest bucket]");
  if (o.min_rows > o.max_rows || o.max_rows > o.max_batch) problems.push_back("need --min-rows <= --max-rows <= --max-batch");
  if (o.layers.size() < 2 || std::any_of(o.layers.begin(), o.layers.end(), [](int w) { return w < 1; }))
    problems.push_back("--layers needs two or more positive widths");
  if (o.min_requests > o.max_requests) problems.push_back("need --min-requests <= --max-requests");
  if (std::any_of(o.rates.begin(), o.rates.end(), [](double r) { return !(r > 0); }) ||
      std::any_of(o.loads.begin(), o.loads.end(), [](double r) { return !(r > 0); }))
    problems.push_back("--rates and --loads must be positive");
  for (const std::string& p : problems) std::fprintf(stderr, "serving: %s\n", p.c_str());
  return problems.empty() ? std::nullopt : std::optional<int>(2);
}

// ---------------------------------------------------------------- model and reference ---------

/// bf16: bf16 operands, float accumulation, flowdsl's matmul kernel (erf gelu, float bias);
/// bf16_cublaslt: the same through cuBLASLt library nodes (its tanh gelu, bf16 hidden biases);
/// f32: float throughout.
enum class Precision { bf16, bf16_cublaslt, f32 };
const char* name_of(Precision p) {
  return p == Precision::bf16 ? "bf16" : p == Precision::bf16_cublaslt ? "bf16_cublaslt" : "f32";
}
bool is_bf16(Precision p) { return p != Precision::f32; }

float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

/// Weights rounded to bfloat16 once, so that both precisions and the reference use the same
/// values; scaled by 1/sqrt(fan-in) so that activations and logits stay of order one.
struct HostModel {
  std::vector<int> widths;
  std::vector<std::vector<float>> weights, biases;  // layer l: [widths[l], widths[l+1]], [widths[l+1]]
  int layers() const { return static_cast<int>(widths.size()) - 1; }
  int classes() const { return widths.back(); }
};

HostModel make_model(const std::vector<int>& widths, unsigned seed) {
  HostModel m{widths, {}, {}};
  for (int l = 0; l < m.layers(); ++l) {
    const std::size_t k = std::size_t(widths[l]), n = std::size_t(widths[l + 1]);
    std::vector<float> w = sample::random_floats(k * n, seed + 100 + unsigned(l));
    const float scale = std::sqrt(3.0f / float(k));  // variance 1 / k
    for (float& x : w) x = round_bf16(x * scale);
    std::vector<float> b = sample::random_floats(n, seed + 200 + unsigned(l));
    for (float& x : b) x *= 0.1f;
    m.weights.push_back(std::move(w));
    m.biases.push_back(std::move(b));
  }
  return m;
}

double tanh_gelu(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

/// One row through the MLP in double, rounding where the device stores: the input and the
/// hidden activations to bfloat16 (bf16) or the hidden activations to float (f32). Returns the
/// softmax probabilities.
std::vector<double> reference_row(const HostModel& m, Precision p, const float* row) {
  const auto store = [p](double v) {
    const float f = static_cast<float>(v);
    return is_bf16(p) ? round_bf16(f) : f;
  };
  const bool lt = p == Precision::bf16_cublaslt;
  std::vector<double> x(row, row + m.widths[0]);
  if (is_bf16(p))
    for (double& v : x) v = round_bf16(static_cast<float>(v));
  for (int l = 0; l < m.layers(); ++l) {
    const int k = m.widths[l], n = m.widths[l + 1];
    const bool last = l + 1 == m.layers();
    std::vector<double> acc(m.biases[l].begin(), m.biases[l].end());
    if (lt && !last)
      for (double& v : acc) v = round_bf16(static_cast<float>(v));  // cuBLASLt's bias has the output's type
    const float* w = m.weights[l].data();
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < n; ++j) acc[j] += x[i] * double(w[std::size_t(i) * n + j]);
    for (double& v : acc) v = last ? v : store(lt ? tanh_gelu(v) : fk::reference::activate(int(fk::Activation::gelu), v));
    x = std::move(acc);
  }
  const double top = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (double& v : x) sum += (v = std::exp(v - top));
  for (double& v : x) v /= sum;
  return x;
}

/// Relative tolerance of a probability: bfloat16 operands keep 8 bits; the f32 path differs
/// from the double reference only by float accumulation over k terms.
double tolerance(Precision p) { return is_bf16(p) ? 1e-2 : 5e-4; }
constexpr double absolute_floor = 1e-6;  // probabilities this small are compared absolutely

// ---------------------------------------------------------------- device side -----------------

std::vector<bf16> to_bf16(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16_rn(v[i]);
  return out;
}

/// The weights on the device in both precisions, and the activations of the largest bucket.
/// One stream runs every batch, in order, so all bucket graphs share the activations.
struct DeviceModel {
  std::vector<DeviceArray<bf16>> weights16;
  std::vector<DeviceArray<float>> weights32, biases;
  std::vector<DeviceArray<bf16>> biases16;  // hidden layers' biases in bf16, for cuBLASLt's epilogue
  DeviceArray<float> x;                  // [max bucket, widths[0]]: the upload lands here
  DeviceArray<bf16> x16;                 // the input cast to bf16
  std::vector<DeviceArray<float>> h;     // layer l's output: [max bucket, widths[l+1]]
  std::vector<DeviceArray<bf16>> h16;    // hidden outputs cast to bf16 (all but the last layer)
  DeviceArray<float> probs;              // [max bucket, classes]
};

DeviceModel upload_model(const HostModel& m, int max_bucket) {
  DeviceModel d;
  const std::size_t rows = std::size_t(max_bucket);
  for (int l = 0; l < m.layers(); ++l) {
    d.weights16.push_back(sample::device_copy(to_bf16(m.weights[l])));
    d.weights32.push_back(sample::device_copy(m.weights[l]));
    d.biases.push_back(sample::device_copy(m.biases[l]));
    d.biases16.push_back(sample::device_copy(to_bf16(m.biases[l])));
    d.h.emplace_back(rows * m.widths[l + 1], 16);
    if (l + 1 < m.layers()) d.h16.emplace_back(rows * m.widths[l + 1], 16);
  }
  d.x = DeviceArray<float>(rows * m.widths[0], 16);
  d.x16 = DeviceArray<bf16>(rows * m.widths[0], 16);
  d.probs = DeviceArray<float>(rows * m.classes(), 16);
  return d;
}

/// One bucket's graph, and the nodes the batcher points at a batch's staging input and output:
/// the two copies, or, in the built-in bf16 graph, the cast that reads the input and the softmax
/// that writes the output themselves (pinned memory is mapped into the device's address space,
/// so the graph holds kernels only and every edge is programmatic).
struct BucketGraph {
  using CastNode = flowdsl::KernelNode<fk::i64, const float*, bf16*>;
  using SoftmaxNode = flowdsl::KernelNode<fk::i32, fk::i32, const float*, float*>;
  int rows = 0;
  Precision precision = Precision::bf16;
  flowdsl::Graph graph;
  std::optional<flowdsl::MemcpyNode> upload, download;  // with copies
  std::optional<CastNode> cast_in;                       // without: reads the staging input
  std::optional<SoftmaxNode> softmax;                    // without: writes the output
  float* input = nullptr;           // where upload writes (device)
  const float* output = nullptr;    // what download reads (device)
  std::size_t input_bytes = 0, output_bytes = 0;

  /// Points the graph at a batch's staging input and output (two parameter changes).
  void bind(const float* staging, float* out) {
    if (upload) {
      upload->set(input, staging, input_bytes);
      download->set(out, output, output_bytes);
    } else {
      cast_in->arg<1>(staging);
      softmax->arg<3>(out);
    }
  }
};

/// [upload ->] [cast ->] (matmul + bias + gelu)* -> matmul + bias -> softmax [-> download]; the
/// built-in bf16 graph has no copies (see BucketGraph). The graph starts pointing at `staging`
/// and `out`; each launch binds its batch's.
BucketGraph make_bucket_graph(const HostModel& m, const DeviceModel& d, Precision p, int rows, const float* staging,
                              float* out) {
  const std::int64_t in_elements = std::int64_t(rows) * m.widths[0];
  BucketGraph b;
  b.rows = rows;
  b.precision = p;
  b.input = d.x.get();
  b.output = d.probs.get();
  b.input_bytes = std::size_t(in_elements) * sizeof(float);
  b.output_bytes = std::size_t(rows) * m.classes() * sizeof(float);
  const bool mapped = p == Precision::bf16;
  flowdsl::Graph& g = b.graph;
  std::optional<flowdsl::NodeHandle> last;  // the node the next one runs after
  if (!mapped) {
    b.upload = g.memcpy("upload", d.x.get(), staging, b.input_bytes);
    last = *b.upload;
  }
  const bf16* a16 = nullptr;
  const float* a32 = d.x.get();
  if (is_bf16(p)) {
    b.cast_in = fk::cast(g, "cast_in", in_elements, mapped ? staging : static_cast<const float*>(d.x.get()), d.x16.get());
    if (last) b.cast_in->after(*last);
    last = *b.cast_in;
    a16 = d.x16.get();
  }
  for (int l = 0; l < m.layers(); ++l) {
    const int k = m.widths[l], n = m.widths[l + 1];
    const bool hidden = l + 1 < m.layers();
    const fk::Activation act = hidden ? fk::Activation::gelu : fk::Activation::none;
    const std::string layer = "linear" + std::to_string(l + 1);
    const float* bias = d.biases[l].get();
    if (p == Precision::bf16_cublaslt) {
      // Hidden layers write bf16 through the fused bias + gelu epilogue: no cast node.
      if (hidden) {
        last = fk::cublaslt_matmul(g, layer, rows, n, k, a16, static_cast<const bf16*>(d.weights16[l].get()),
                                   static_cast<const bf16*>(d.biases16[l].get()), fk::Epilogue::bias_gelu, d.h16[l].get())
                   .after(*last);
        a16 = d.h16[l].get();
      } else {
        last = fk::cublaslt_matmul(g, layer, rows, n, k, a16, static_cast<const bf16*>(d.weights16[l].get()), bias,
                                   fk::Epilogue::bias, d.h[l].get())
                   .after(*last);
      }
    } else if (p == Precision::bf16) {
      // Hidden layers write bf16 at once (matmul_cast); the kernels' edges are programmatic, so
      // each product launches while the one before finishes.
      g.programmatic_edges(true);
      if (hidden) {
        last = fk::matmul_cast(g, layer, rows, n, k, a16, static_cast<const bf16*>(d.weights16[l].get()), bias, act,
                               d.h16[l].get())
                   .after(*last);
        a16 = d.h16[l].get();
      } else {
        last = fk::matmul(g, layer, rows, n, k, a16, static_cast<const bf16*>(d.weights16[l].get()), bias, act, d.h[l].get())
                   .after(*last);
      }
    } else {
      last = fk::matmul(g, layer, rows, n, k, a32, static_cast<const float*>(d.weights32[l].get()), bias, act, d.h[l].get())
                 .after(*last);
      a32 = d.h[l].get();
    }
  }
  b.softmax = fk::softmax(g, "softmax", rows, m.classes(), static_cast<const float*>(d.h.back().get()),
                          mapped ? out : d.probs.get());
  b.softmax->after(*last);
  if (!mapped) b.download = g.memcpy("download", out, d.probs.get(), b.output_bytes).after(*b.softmax);
  return b;
}

/// What one batch in flight owns on the host: its staging input (pinned; rows past the batch are
/// kept zero, so that padding rows compute on zeros), its output, and events around its launch.
struct Slot {
  PinnedArray<float> staging, out;
  flowdsl::EventHandle start, end;
  int filled = 0;  // rows of staging that may be non-zero
  // The batch in flight: requests [first, first + count), `rows` real rows, its bucket graph.
  int first = 0, count = 0, rows = 0;
  const BucketGraph* bucket = nullptr;
};

// ---------------------------------------------------------------- workload --------------------

/// Pre-drawn arrivals: request i arrives `arrival[i]` seconds after the start, holds `rows[i]`
/// rows, input rows pool[(pool_start[i] + r) % pool_rows].
struct Workload {
  double rate = 0;
  std::vector<double> arrival;
  std::vector<int> rows, pool_start;
  std::vector<std::int64_t> row_prefix;  // rows of requests [0, i)
};

Workload make_workload(double rate, int count, const Options& o, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::uniform_int_distribution<int> rows(o.min_rows, o.max_rows), start(0, o.pool_rows - 1);
  Workload w{rate, {}, {}, {}, {0}};
  double t = 0;
  for (int i = 0; i < count; ++i) {
    w.arrival.push_back(t += gap(rng));
    w.rows.push_back(rows(rng));
    w.pool_start.push_back(start(rng));
    w.row_prefix.push_back(w.row_prefix.back() + w.rows.back());
  }
  return w;
}

// ---------------------------------------------------------------- one configuration -----------

struct Mode {
  std::string name;
  Precision precision;
  bool batching;  // false: one request a launch
  bool eager;     // launch_eagerly instead of Runtime::launch
};

/// `bf16`: the precision of the bf16 modes (bf16 or bf16_cublaslt, as --gemm says).
Mode mode_named(const std::string& name, Precision bf16) {
  if (name == "batch1") return {name, bf16, false, false};
  if (name == "dynamic_graph") return {name, bf16, true, false};
  if (name == "dynamic_stream") return {name, bf16, true, true};
  return {"dynamic_f32", Precision::f32, true, false};
}

/// A batch kept for the correctness check: its rows' pool indices and its whole output.
struct KeptBatch {
  int bucket_rows = 0;
  std::vector<int> pool_rows;  // one per real row
  std::vector<float> out;      // [bucket_rows, classes]
};

struct RunResult {
  Mode mode;
  double rate = 0;
  int requests = 0, served = 0;
  std::vector<double> latency;  // seconds, one per request; unserved: a lower bound (end - arrival)
  double wall_s = 0;            // from the start of arrivals to the last completion seen
  double gpu_s = 0;             // sum of the batches' event-timed spans
  int batches = 0, served_batches = 0;
  std::int64_t launched_rows = 0, served_rows = 0;
  std::int64_t padded_rows = 0;   // bucket rows of the launched batches, padding included
  std::vector<double> launch_us;  // host time of each launch call (graph launch or eager enqueue)
  std::uint64_t misses = 0, reinstantiations = 0, node_updates = 0;  // the runtime's, during the run
  std::vector<KeptBatch> kept;
  // Filled by check().
  int checked_rows = 0, checked_padding_rows = 0, failures = 0;
  double max_error = 0;  // largest |got - want| / max(|want|, absolute_floor)
};

/// Everything a configuration runs with.
struct Server {
  const Options& options;
  const HostModel& model;
  const std::vector<float>& pool;  // [pool_rows, widths[0]]
  std::vector<BucketGraph>& graphs;
  std::vector<Slot>& slots;
  flowdsl::Runtime& runtime;
  cudaStream_t stream;
};

/// The smallest bucket of `precision` holding `rows`.
BucketGraph& bucket_for(Server& s, Precision precision, int rows) {
  for (BucketGraph& b : s.graphs)
    if (b.precision == precision && b.rows >= rows) return b;  // graphs are in ascending rows
  std::fprintf(stderr, "serving: no bucket holds %d rows\n", rows);
  std::exit(1);
}

/// Copies requests [first, first + count) into the slot's staging rows, zeroes the rows the
/// slot's previous batch left past them, binds the bucket graph to the slot and launches it
/// between the slot's events. `now`: the batcher's clock, past every one of their arrivals.
void launch_batch(Server& s, const Mode& mode, const Workload& w, Slot& slot, int first, int count, double now,
                  RunResult& r) {
  if (w.arrival[first + count - 1] > now) {  // the batcher's promise; cheap to keep honest
    std::fprintf(stderr, "serving: request %d launched before its arrival\n", first + count - 1);
    std::exit(1);
  }
  const int width = s.model.widths[0];
  const std::size_t row_bytes = std::size_t(width) * sizeof(float);
  const int rows = int(w.row_prefix[first + count] - w.row_prefix[first]);
  float* staging = slot.staging.get();
  for (int i = first, row = 0; i < first + count; ++i) {
    for (int q = 0; q < w.rows[i]; ++q, ++row) {
      const int p = (w.pool_start[i] + q) % s.options.pool_rows;
      std::memcpy(staging + std::size_t(row) * width, s.pool.data() + std::size_t(p) * width, row_bytes);
    }
  }
  if (slot.filled > rows) std::memset(staging + std::size_t(rows) * width, 0, std::size_t(slot.filled - rows) * row_bytes);
  slot.filled = rows;

  BucketGraph& b = bucket_for(s, mode.precision, rows);
  b.bind(staging, slot.out.get());
  SAMPLE_CHECK(cudaEventRecord(slot.start.get(), s.stream));
  const Clock::time_point call = Clock::now();
  if (mode.eager) {
    flowdsl::launch_eagerly(b.graph, s.stream);
  } else {
    s.runtime.launch(b.graph, s.stream);
  }
  r.launch_us.push_back(1e6 * std::chrono::duration<double>(Clock::now() - call).count());
  SAMPLE_CHECK(cudaEventRecord(slot.end.get(), s.stream));

  slot.first = first;
  slot.count = count;
  slot.rows = rows;
  slot.bucket = &b;
  ++r.batches;
  r.launched_rows += rows;
  r.padded_rows += b.rows;
}

/// Records the completion of the slot's batch, seen by the host at `now`; keeps its output for
/// the check when it is the first batch of its bucket or every options.check_every batches.
void retire(const Server& s, const Workload& w, Slot& slot, double now, std::set<int>& buckets_seen, RunResult& r) {
  for (int i = slot.first; i < slot.first + slot.count; ++i) r.latency[i] = now - w.arrival[i];
  r.served += slot.count;
  r.served_rows += slot.rows;
  float ms = 0;
  SAMPLE_CHECK(cudaEventElapsedTime(&ms, slot.start.get(), slot.end.get()));
  r.gpu_s += 1e-3 * ms;
  const int retired = r.served_batches++;
  if (buckets_seen.insert(slot.bucket->rows).second || retired % s.options.check_every == 0) {
    KeptBatch k{slot.bucket->rows, {}, {}};
    for (int i = slot.first; i < slot.first + slot.count; ++i)
      for (int q = 0; q < w.rows[i]; ++q) k.pool_rows.push_back((w.pool_start[i] + q) % s.options.pool_rows);
    const float* out = slot.out.get();
    k.out.assign(out, out + std::size_t(slot.bucket->rows) * s.model.classes());
    r.kept.push_back(std::move(k));
  }
}

/// How many of the waiting requests [next, arrived) to launch at `now` as one batch; 0: wait.
/// batch1: one, as soon as one waits. Dynamic: once max_batch rows wait or the oldest has
/// waited max_wait, as many as fit in max_batch rows, oldest first.
int batch_to_launch(const Options& o, const Mode& mode, const Workload& w, int next, int arrived, double now) {
  if (next == arrived) return 0;
  if (!mode.batching) return 1;
  const bool full = w.row_prefix[arrived] - w.row_prefix[next] >= o.max_batch;
  if (!full && now - w.arrival[next] < o.max_wait_us * 1e-6) return 0;
  int count = 1;
  while (next + count < arrived && w.row_prefix[next + count + 1] - w.row_prefix[next] <= o.max_batch) ++count;
  return count;
}

/// Replays the workload against the steady clock: one thread polls the in-flight batches for
/// completion and launches a batch when a slot is free and batch_to_launch says so. After the
/// last arrival plus options.drain_s nothing more is launched; requests still waiting are
/// unserved and keep a lower bound of their latency.
RunResult serve(Server& s, const Mode& mode, const Workload& w) {
  const Options& o = s.options;
  const int n = int(w.arrival.size()), depth = int(s.slots.size());
  RunResult r;
  r.mode = mode;
  r.rate = w.rate;
  r.requests = n;
  r.latency.assign(std::size_t(n), 0.0);
  const flowdsl::RuntimeStatistics before = s.runtime.statistics();
  const double deadline = w.arrival.back() + o.drain_s;
  std::set<int> buckets_seen;
  int next = 0, arrived = 0;  // requests launched: [0, next); arrived: [0, arrived)
  int oldest = 0, busy = 0;   // slots in flight: oldest, oldest + 1, ... (mod depth), in launch order
  const Clock::time_point t0 = Clock::now();
  const auto clock = [t0] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  for (;;) {
    // One stream: batches complete in launch order.
    while (busy > 0) {
      Slot& slot = s.slots[std::size_t(oldest)];
      const cudaError_t status = cudaEventQuery(slot.end.get());
      if (status == cudaErrorNotReady) break;
      SAMPLE_CHECK(status);
      retire(s, w, slot, clock(), buckets_seen, r);
      oldest = (oldest + 1) % depth;
      --busy;
    }
    const double now = clock();
    if (next == n || now >= deadline) {
      if (busy == 0) break;
      continue;
    }
    while (arrived < n && w.arrival[arrived] <= now) ++arrived;
    if (busy == depth) continue;
    const int count = batch_to_launch(o, mode, w, next, arrived, now);
    if (count == 0) continue;
    launch_batch(s, mode, w, s.slots[std::size_t((oldest + busy) % depth)], next, count, now, r);
    next += count;
    ++busy;
  }
  r.wall_s = clock();
  for (int i = next; i < n; ++i) r.latency[i] = r.wall_s - w.arrival[i];
  const flowdsl::RuntimeStatistics after = s.runtime.statistics();
  r.misses = after.misses - before.misses;
  r.reinstantiations = after.reinstantiations - before.reinstantiations;
  r.node_updates = after.node_updates - before.node_updates;
  return r;
}

// ---------------------------------------------------------------- calibration -----------------

/// Median GPU time of one batch of each bucket graph (events around each launch, alone on the
/// stream), after warm-up launches that also instantiate every executable. Also runs each
/// bf16 graph once eagerly, so that no mode pays first-launch costs in its timed run.
std::map<const BucketGraph*, double> calibrate(Server& s, int repeats) {
  Slot& slot = s.slots.front();
  const int width = s.model.widths[0], max_rows = s.options.buckets.back();
  for (int row = 0; row < max_rows; ++row)  // data rather than zeros: tensor cores draw more power on data
    std::memcpy(slot.staging.get() + std::size_t(row) * width,
                s.pool.data() + std::size_t(row % s.options.pool_rows) * width, std::size_t(width) * sizeof(float));
  slot.filled = max_rows;
  std::map<const BucketGraph*, double> seconds;
  for (BucketGraph& b : s.graphs) {
    b.bind(slot.staging.get(), slot.out.get());
    std::vector<double> times;
    for (int i = 0; i < repeats + 3; ++i) {
      SAMPLE_CHECK(cudaEventRecord(slot.start.get(), s.stream));
      s.runtime.launch(b.graph, s.stream);
      SAMPLE_CHECK(cudaEventRecord(slot.end.get(), s.stream));
      SAMPLE_CHECK(cudaEventSynchronize(slot.end.get()));
      float ms = 0;
      SAMPLE_CHECK(cudaEventElapsedTime(&ms, slot.start.get(), slot.end.get()));
      if (i >= 3) times.push_back(1e-3 * ms);
    }
    seconds[&b] = sample::median(times);
    if (is_bf16(b.precision)) flowdsl::launch_eagerly(b.graph, s.stream);
  }
  SAMPLE_CHECK(cudaStreamSynchronize(s.stream));
  return seconds;
}

// ---------------------------------------------------------------- correctness -----------------

/// Reference probabilities by (precision, pool row; -1: a row of zeros, i.e. padding), computed
/// on demand on every host core.
class References {
 public:
  References(const HostModel& m, const std::vector<float>& pool) : model_(m), pool_(pool) {}

  void prepare(const std::set<std::pair<Precision, int>>& keys) {
    std::vector<std::pair<Precision, int>> missing;
    for (const auto& k : keys)
      if (rows_.count(k) == 0) missing.push_back(k);
    if (missing.empty()) return;
    std::vector<std::vector<double>> computed(missing.size());
    const std::vector<float> zeros(std::size_t(model_.widths[0]), 0.0f);
    const unsigned threads = std::max(1u, std::min(std::thread::hardware_concurrency(), unsigned(missing.size())));
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        for (std::size_t i = t; i < missing.size(); i += threads) {
          const int row = missing[i].second;
          const float* x = row < 0 ? zeros.data() : pool_.data() + std::size_t(row) * model_.widths[0];
          computed[i] = reference_row(model_, missing[i].first, x);
        }
      });
    }
    for (std::thread& w : workers) w.join();
    for (std::size_t i = 0; i < missing.size(); ++i) rows_[missing[i]] = std::move(computed[i]);
  }
  const std::vector<double>& at(Precision p, int row) const { return rows_.at({p, row}); }

 private:
  const HostModel& model_;
  const std::vector<float>& pool_;
  std::map<std::pair<Precision, int>, std::vector<double>> rows_;
};

/// The rows of a kept batch that are compared: its first, middle and last real rows, and its
/// first and last padding rows; as (row, pool row or -1).
std::vector<std::pair<int, int>> rows_to_check(const KeptBatch& k) {
  const int real = int(k.pool_rows.size());
  std::set<int> rows{0, real / 2, real - 1};
  if (k.bucket_rows > real) rows.insert({real, k.bucket_rows - 1});
  std::vector<std::pair<int, int>> out;
  for (int row : rows) out.emplace_back(row, row < real ? k.pool_rows[std::size_t(row)] : -1);
  return out;
}

/// Compares the kept batches with the reference; fills the check's figures of `r` and prints the
/// first few mismatches.
void check(RunResult& r, const HostModel& m, References& refs) {
  const Precision p = r.mode.precision;
  std::set<std::pair<Precision, int>> keys;
  for (const KeptBatch& k : r.kept)
    for (const auto& [row, pool_row] : rows_to_check(k)) keys.insert({p, pool_row});
  refs.prepare(keys);
  const int classes = m.classes();
  for (std::size_t b = 0; b < r.kept.size(); ++b) {
    const KeptBatch& k = r.kept[b];
    for (const auto& [row, pool_row] : rows_to_check(k)) {
      const std::vector<double>& want = refs.at(p, pool_row);
      bool row_ok = true;
      for (int c = 0; c < classes; ++c) {
        const double got = k.out[std::size_t(row) * classes + c];
        const double error = std::fabs(got - want[c]) / std::max(std::fabs(want[c]), absolute_floor);
        r.max_error = std::max(r.max_error, std::isnan(error) ? INFINITY : error);
        if (!(error <= tolerance(p))) {
          if (row_ok && r.failures < 5)
            std::fprintf(stderr, "serving: %s at %.0f req/s, kept batch %zu (bucket %d), row %d%s, class %d: %.6g, want %.6g\n",
                         r.mode.name.c_str(), r.rate, b, k.bucket_rows, row, pool_row < 0 ? " (padding)" : "", c, got,
                         want[c]);
          row_ok = false;
        }
      }
      r.failures += !row_ok;
      ++(pool_row < 0 ? r.checked_padding_rows : r.checked_rows);
    }
  }
  r.kept.clear();
}

// ---------------------------------------------------------------- report ----------------------

/// Nearest-rank percentile `q` (0..1) of `v`.
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t rank = std::size_t(std::ceil(q * double(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

struct Figures {
  double p50_us, p99_us, mean_us, max_us;
  bool lower_bounds;  // some requests went unserved: their latencies, so the percentiles, are lower bounds
  double requests_per_s, rows_per_s, padding_waste, gpu_busy, rows_per_batch, launch_us_median;
};

Figures figures_of(const RunResult& r) {
  Figures f{};
  f.p50_us = 1e6 * percentile(r.latency, 0.50);
  f.p99_us = 1e6 * percentile(r.latency, 0.99);
  if (!r.latency.empty()) {
    f.mean_us = 1e6 * std::accumulate(r.latency.begin(), r.latency.end(), 0.0) / double(r.latency.size());
    f.max_us = 1e6 * *std::max_element(r.latency.begin(), r.latency.end());
  }
  f.lower_bounds = r.served < r.requests;
  f.requests_per_s = r.wall_s > 0 ? r.served / r.wall_s : 0;
  f.rows_per_s = r.wall_s > 0 ? double(r.served_rows) / r.wall_s : 0;
  f.padding_waste = r.padded_rows > 0 ? double(r.padded_rows - r.launched_rows) / double(r.padded_rows) : 0;
  f.gpu_busy = r.wall_s > 0 ? r.gpu_s / r.wall_s : 0;
  f.rows_per_batch = r.batches > 0 ? double(r.launched_rows) / r.batches : 0;
  f.launch_us_median = sample::median(r.launch_us);
  return f;
}

void print_table(const std::vector<RunResult>& runs) {
  std::printf("\n%-15s %11s %8s %8s %10s %10s %11s %11s %8s %7s %6s %6s %9s %s\n", "mode", "rate req/s", "requests", "unserved",
              "p50 us", "p99 us", "done req/s", "rows/s", "batches", "rows/b", "pad %", "GPU %", "launch us", "check");
  std::string last_mode;
  for (const RunResult& r : runs) {
    if (!last_mode.empty() && r.mode.name != last_mode) std::printf("\n");
    last_mode = r.mode.name;
    const Figures f = figures_of(r);
    const char* bound = f.lower_bounds ? ">" : "";
    char p50[32], p99[32];
    std::snprintf(p50, sizeof p50, "%s%.1f", bound, f.p50_us);
    std::snprintf(p99, sizeof p99, "%s%.1f", bound, f.p99_us);
    std::printf("%-15s %11.0f %8d %8d %10s %10s %11.0f %11.0f %8d %7.1f %6.1f %6.1f %9.1f %s\n", r.mode.name.c_str(), r.rate,
                r.requests, r.requests - r.served, p50, p99, f.requests_per_s, f.rows_per_s, r.batches, f.rows_per_batch,
                100 * f.padding_waste, 100 * f.gpu_busy, f.launch_us_median, r.failures == 0 ? "ok" : "FAILED");
  }
}

nlohmann::ordered_json device_json() {
  cudaDeviceProp prop{};
  int device = 0, driver = 0, runtime = 0;
  SAMPLE_CHECK(cudaGetDevice(&device));
  SAMPLE_CHECK(cudaGetDeviceProperties(&prop, device));
  SAMPLE_CHECK(cudaDriverGetVersion(&driver));
  SAMPLE_CHECK(cudaRuntimeGetVersion(&runtime));
  // The keys of bench::device_header (bench/bench_cuda.hpp), so that reports read alike.
  return {{"bench", "serving"},
          {"gpu", prop.name},
          {"driver_version", driver},
          {"runtime_version", runtime},
          {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
          {"multiprocessors", prop.multiProcessorCount}};
}

nlohmann::ordered_json options_json(const Options& o) {
  return {{"layers", o.layers},         {"buckets", o.buckets},         {"max_batch_rows", o.max_batch},
          {"request_rows", {o.min_rows, o.max_rows}},                    {"max_wait_us", o.max_wait_us},
          {"in_flight", o.in_flight},   {"duration_s", o.duration_s},   {"requests", {o.min_requests, o.max_requests}},
          {"drain_s", o.drain_s},       {"check_every", o.check_every}, {"pool_rows", o.pool_rows},
          {"seed", o.seed},             {"quick", o.quick},             {"gemm", o.gemm}};
}

nlohmann::ordered_json run_json(const RunResult& r) {
  const Figures f = figures_of(r);
  return {{"mode", r.mode.name},
          {"precision", name_of(r.mode.precision)},
          {"batching", r.mode.batching ? "dynamic" : "none"},
          {"launch", r.mode.eager ? "stream" : "graph"},
          {"rate_rps", r.rate},
          {"requests", r.requests},
          {"served", r.served},
          {"unserved", r.requests - r.served},
          {"latency_us",
           {{"p50", f.p50_us}, {"p99", f.p99_us}, {"mean", f.mean_us}, {"max", f.max_us}, {"lower_bounds", f.lower_bounds}}},
          {"throughput", {{"requests_per_s", f.requests_per_s}, {"rows_per_s", f.rows_per_s}}},
          {"batches", r.batches},
          {"rows_per_batch", f.rows_per_batch},
          {"padding_waste", f.padding_waste},
          {"gpu_busy", f.gpu_busy},
          {"gpu_s", r.gpu_s},
          {"wall_s", r.wall_s},
          {"launch_call_us_median", f.launch_us_median},
          {"cache", {{"misses", r.misses}, {"reinstantiations", r.reinstantiations}, {"node_updates", r.node_updates}}},
          {"check",
           {{"rows", r.checked_rows},
            {"padding_rows", r.checked_padding_rows},
            {"failures", r.failures},
            {"max_relative_error", r.max_error},
            {"tolerance", tolerance(r.mode.precision)}}}};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const std::optional<int> stop = parse_options(argc, argv, o)) return *stop;
  if (!sample::have_device()) return sample::skipped;

  std::vector<Mode> modes;
  const Precision bf16_precision = o.gemm == "cublaslt" ? Precision::bf16_cublaslt : Precision::bf16;
  for (const std::string& name : o.modes) modes.push_back(mode_named(name, bf16_precision));
  const HostModel model = make_model(o.layers, o.seed);
  const std::vector<float> pool = sample::random_floats(std::size_t(o.pool_rows) * o.layers[0], o.seed + 7);
  const int max_bucket = o.buckets.back(), width = o.layers[0];
  const double mean_rows = 0.5 * (o.min_rows + o.max_rows);

  bool ok = true;
  try {
    const DeviceModel device = upload_model(model, max_bucket);
    std::vector<Slot> slots(std::size_t(o.in_flight));
    for (Slot& slot : slots) {
      slot.staging = PinnedArray<float>(std::size_t(max_bucket) * width);
      std::memset(slot.staging.get(), 0, slot.staging.bytes());
      slot.out = PinnedArray<float>(std::size_t(max_bucket) * model.classes());
      slot.start = flowdsl::make_event();
      slot.end = flowdsl::make_event();
    }
    std::vector<BucketGraph> graphs;  // by precision, then ascending rows (bucket_for relies on it)
    graphs.reserve(3 * o.buckets.size());
    for (Precision p : {Precision::bf16, Precision::bf16_cublaslt, Precision::f32})
      for (int rows : o.buckets)
        graphs.push_back(make_bucket_graph(model, device, p, rows, slots[0].staging.get(), slots[0].out.get()));
    flowdsl::Runtime runtime;
    const flowdsl::StreamHandle stream = flowdsl::make_stream();
    Server server{o, model, pool, graphs, slots, runtime, stream.get()};

    const std::map<const BucketGraph*, double> service = calibrate(server, o.quick ? 5 : 20);
    const double full_batch_s = service.at(&bucket_for(server, bf16_precision, o.max_batch));
    const double capacity = o.max_batch / full_batch_s / mean_rows;  // requests/s, bf16, full batches back to back

    std::printf("serving: MLP");
    for (std::size_t l = 0; l < o.layers.size(); ++l) std::printf("%s%d", l ? "-" : " ", o.layers[l]);
    std::printf(", requests of %d..%d rows, buckets", o.min_rows, o.max_rows);
    for (int b : o.buckets) std::printf(" %d", b);
    std::printf(" rows, batches of at most %d rows or %.0f us of waiting, %d in flight\n", o.max_batch, o.max_wait_us,
                o.in_flight);
    std::printf("GPU time of one batch (us, median of %d, graph launch):\n", o.quick ? 5 : 20);
    for (Precision p : {Precision::bf16, Precision::bf16_cublaslt, Precision::f32}) {
      std::printf("  %-13s", name_of(p));
      for (const BucketGraph& b : graphs)
        if (b.precision == p) std::printf("  %d rows: %.1f", b.rows, 1e6 * service.at(&b));
      std::printf("\n");
    }
    std::printf("capacity estimate (%s, batches of %d rows back to back): %.0f requests/s\n", name_of(bf16_precision),
                o.max_batch, capacity);

    std::vector<double> rates = o.rates;
    if (rates.empty())
      for (double load : o.loads) rates.push_back(load * capacity);
    std::vector<Workload> workloads;
    for (std::size_t i = 0; i < rates.size(); ++i) {
      const double wanted = std::round(rates[i] * o.duration_s);
      const int count = int(std::clamp(wanted, double(o.min_requests), double(o.max_requests)));
      workloads.push_back(make_workload(rates[i], count, o, o.seed + 1000 + unsigned(i)));  // one draw per rate, every mode
    }

    References refs(model, pool);
    std::vector<RunResult> runs;
    for (const Mode& mode : modes) {
      for (const Workload& w : workloads) {
        runs.push_back(serve(server, mode, w));
        RunResult& r = runs.back();
        check(r, model, refs);
        ok = ok && r.failures == 0;
        std::fprintf(stderr, "%s at %.0f req/s: %d of %d served in %.2f s, %d rows checked (+%d padding), %s\n",
                     mode.name.c_str(), w.rate, r.served, r.requests, r.wall_s, r.checked_rows, r.checked_padding_rows,
                     r.failures == 0 ? "ok" : "MISMATCH");
      }
    }
    print_table(runs);

    const flowdsl::RuntimeStatistics st = runtime.statistics();
    std::uint64_t run_misses = 0, run_reinstantiations = 0;
    for (const RunResult& r : runs) run_misses += r.misses, run_reinstantiations += r.reinstantiations;
    std::printf("\ncache: launches=%llu misses=%llu node_updates=%llu reinstantiations=%llu (during the runs: %llu misses, "
                "%llu reinstantiations)\n",
                static_cast<unsigned long long>(st.launches), static_cast<unsigned long long>(st.misses),
                static_cast<unsigned long long>(st.node_updates), static_cast<unsigned long long>(st.reinstantiations),
                static_cast<unsigned long long>(run_misses), static_cast<unsigned long long>(run_reinstantiations));
    const bool updates_only = run_misses == 0 && run_reinstantiations == 0;
    if (!updates_only) std::printf("expected every executable instantiated before the runs and parameter-only updates\n");

    if (!o.json_path.empty()) {
      nlohmann::ordered_json j = device_json();
      j["options"] = options_json(o);
      nlohmann::ordered_json per_batch;
      for (Precision p : {Precision::bf16, Precision::bf16_cublaslt, Precision::f32})
        for (const BucketGraph& b : graphs)
          if (b.precision == p) per_batch[name_of(p)][std::to_string(b.rows)] = 1e6 * service.at(&b);
      j["batch_gpu_us"] = per_batch;
      j["capacity_estimate_rps"] = capacity;
      j["runs"] = nlohmann::ordered_json::array();
      for (const RunResult& r : runs) {
        j["runs"].push_back(run_json(r));
        j["runs"].back()["load"] = r.rate / capacity;  // the rate as a fraction of the capacity estimate
      }
      j["cache"] = {{"launches", st.launches},
                    {"misses", st.misses},
                    {"node_updates", st.node_updates},
                    {"reinstantiations", st.reinstantiations},
                    {"parameter_only_during_runs", updates_only}};
      j["ok"] = ok && updates_only;
      std::ofstream file(o.json_path);
      file << j.dump(2) << "\n";
      if (!file) {
        std::fprintf(stderr, "serving: cannot write %s\n", o.json_path.c_str());
        return 1;
      }
      std::printf("wrote %s\n", o.json_path.c_str());
    }
    ok = ok && updates_only;
  } catch (const flowdsl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf(ok ? "serving: matches reference\n" : "serving: FAILED (see above)\n");
  return ok ? 0 : 1;
}
