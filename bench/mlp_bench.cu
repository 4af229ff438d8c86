// SPDX-License-Identifier: Apache-2.0
// The serving MLP (1024 -> 4096 -> 1024 -> 16, bf16, upload and download included) per batch,
// in one process: flowdsl graphs with cuBLASLt library nodes and with the built-in matmul (with
// copy nodes, and with none: its cast reads the pinned input, its softmax writes the pinned
// output), against a hand-written CUDA graph of the same cuBLASLt calls; the cost of recording a library
// node again after an argument change against raw CUDA doing the same; and the host cost of hit
// launches; with --profile, where each bucket's time goes (flowdsl::Profiler). Writes the
// weights for bench/torch_mlp.py, PyTorch's CUDA graph of the same MLP.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common.cuh"
#include "flowdsl/cublaslt.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/kernels.hpp"
#include "mlp_reference_impls.cuh"
#include "npy.hpp"

namespace fk = flowdsl::kernels;
using bf16 = __nv_bfloat16;
using Clock = std::chrono::steady_clock;

namespace {

struct Model {
  std::vector<int> widths{1024, 4096, 1024, 16};
  std::vector<std::vector<float>> weights, biases;  // row-major [k][n] rounded to bf16, [n]
};

// The serving sample's model: weights of variance 1 / fan-in rounded to bf16, biases of 0.1.
Model make_model(unsigned seed) {
  Model m;
  for (std::size_t l = 0; l + 1 < m.widths.size(); ++l) {
    const std::size_t k = std::size_t(m.widths[l]), n = std::size_t(m.widths[l + 1]);
    std::vector<float> w = sample::random_floats(k * n, seed + 100 + unsigned(l));
    const float scale = std::sqrt(3.0f / float(k));
    for (float& x : w) x = __bfloat162float(__float2bfloat16_rn(x * scale));
    std::vector<float> b = sample::random_floats(n, seed + 200 + unsigned(l));
    for (float& x : b) x *= 0.1f;
    m.weights.push_back(std::move(w));
    m.biases.push_back(std::move(b));
  }
  return m;
}

// Activations of the largest bucket, shared by the flowdsl graphs (one stream runs them in turn).
struct Activations {
  explicit Activations(const Model& m, int rows)
      : x(std::size_t(rows) * m.widths[0]),
        x16(std::size_t(rows) * m.widths[0]),
        h1(std::size_t(rows) * m.widths[1]),
        h2(std::size_t(rows) * m.widths[2]),
        h1f(std::size_t(rows) * m.widths[1]),
        h2f(std::size_t(rows) * m.widths[2]),
        logits(std::size_t(rows) * m.widths[3]),
        probs(std::size_t(rows) * m.widths[3]) {}
  mlp_bench::DeviceBuffer<float> x;
  mlp_bench::DeviceBuffer<bf16> x16, h1, h2;
  mlp_bench::DeviceBuffer<float> h1f, h2f, logits, probs;
};

// builtin_mapped: the built-in graph without copy nodes: the cast reads the pinned input and the
// softmax writes the pinned output themselves, over the bus (pinned memory is mapped into the
// device's address space), so the graph holds only kernels, all on programmatic edges.
enum class Gemm { cublaslt, builtin, builtin_mapped };

struct MlpGraph {
  flowdsl::Graph graph;
  flowdsl::LibraryNode<fk::i32, fk::i32, fk::i32, const bf16*, const bf16*, const float*, fk::i32, float*> last{nullptr, 0};
};

// upload -> cast -> three products -> softmax -> download: with cuBLASLt the hidden layers' bias
// + gelu is fused and writes bf16 (7 nodes); so is the built-in matmul's (matmul_cast), on
// programmatic edges.
MlpGraph make_graph(const mlp_bench::MlpWeights& w, Activations& a, Gemm gemm, int rows, const float* in, float* out) {
  const int w0 = w.widths[0], w1 = w.widths[1], w2 = w.widths[2], classes = w.widths[3];
  MlpGraph m;
  flowdsl::Graph& g = m.graph;
  const bool mapped = gemm == Gemm::builtin_mapped;
  flowdsl::NodeHandle last = fk::cast(g, "cast_in", std::int64_t(rows) * w0, mapped ? in : a.x.get(), a.x16.get());
  if (!mapped) last.after(g.memcpy("upload", a.x.get(), in, std::size_t(rows) * w0 * sizeof(float)));
  if (gemm == Gemm::cublaslt) {
    last = fk::cublaslt_matmul(g, "linear1", rows, w1, w0, static_cast<const bf16*>(a.x16.get()), w.weights[0].get(),
                               static_cast<const bf16*>(w.biases16[0].get()), fk::Epilogue::bias_gelu, a.h1.get())
               .after(last);
    last = fk::cublaslt_matmul(g, "linear2", rows, w2, w1, static_cast<const bf16*>(a.h1.get()), w.weights[1].get(),
                               static_cast<const bf16*>(w.biases16[1].get()), fk::Epilogue::bias_gelu, a.h2.get())
               .after(last);
    m.last = fk::cublaslt_matmul(g, "linear3", rows, classes, w2, static_cast<const bf16*>(a.h2.get()), w.weights[2].get(),
                                 static_cast<const float*>(w.biases[2].get()), fk::Epilogue::bias, a.logits.get())
                 .after(last);
    last = m.last;
  } else {
    // The cast variant writes the hidden layers in bf16 at once, and programmatic edges let each
    // product launch while the one before finishes (every built-in kernel waits for its producers).
    g.programmatic_edges(true);
    last = fk::matmul_cast(g, "linear1", rows, w1, w0, static_cast<const bf16*>(a.x16.get()),
                           static_cast<const bf16*>(w.weights[0].get()), w.biases[0].get(), fk::Activation::gelu, a.h1.get())
               .after(last);
    last = fk::matmul_cast(g, "linear2", rows, w2, w1, static_cast<const bf16*>(a.h1.get()),
                           static_cast<const bf16*>(w.weights[1].get()), w.biases[1].get(), fk::Activation::gelu, a.h2.get())
               .after(last);
    last = fk::matmul(g, "linear3", rows, classes, w2, static_cast<const bf16*>(a.h2.get()),
                      static_cast<const bf16*>(w.weights[2].get()), w.biases[2].get(), fk::Activation::none, a.logits.get())
               .after(last);
  }
  last = fk::softmax(g, "softmax", rows, classes, static_cast<const float*>(a.logits.get()), mapped ? out : a.probs.get())
             .after(last);
  if (!mapped) g.memcpy("download", out, a.probs.get(), std::size_t(rows) * classes * sizeof(float)).after(last);
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// GPU time of one batch of each variant: events around each launch, alone on the stream, the
// variants taking turns so that they meet the same clocks; medians in us.
std::vector<double> batch_us(cudaStream_t stream, int warmup, int repeats, const std::vector<std::function<void()>>& launches) {
  cudaEvent_t start = nullptr, end = nullptr;
  SAMPLE_CHECK(cudaEventCreate(&start));
  SAMPLE_CHECK(cudaEventCreate(&end));
  std::vector<std::vector<double>> times(launches.size());
  for (int i = 0; i < warmup + repeats; ++i) {
    for (std::size_t v = 0; v < launches.size(); ++v) {
      SAMPLE_CHECK(cudaEventRecord(start, stream));
      launches[v]();
      SAMPLE_CHECK(cudaEventRecord(end, stream));
      SAMPLE_CHECK(cudaEventSynchronize(end));
      float ms = 0;
      SAMPLE_CHECK(cudaEventElapsedTime(&ms, start, end));
      if (i >= warmup) times[v].push_back(1e3 * ms);
    }
  }
  SAMPLE_CHECK(cudaEventDestroy(start));
  SAMPLE_CHECK(cudaEventDestroy(end));
  std::vector<double> medians;
  for (std::vector<double>& t : times) medians.push_back(median(std::move(t)));
  return medians;
}

// Wall time of `step` (which ends with the stream synchronised): median in us.
template <class Step>
double wall_us(int warmup, int repeats, Step&& step) {
  std::vector<double> times;
  for (int i = 0; i < warmup + repeats; ++i) {
    const Clock::time_point t = Clock::now();
    step(i);
    if (i >= warmup) times.push_back(1e6 * std::chrono::duration<double>(Clock::now() - t).count());
  }
  return median(times);
}

// Largest |a - b| over the probabilities of the batch's real rows.
double max_difference(const float* a, const float* b, std::size_t n) {
  double d = 0;
  for (std::size_t i = 0; i < n; ++i) d = std::max(d, std::isfinite(a[i]) && std::isfinite(b[i]) ? std::fabs(double(a[i]) - b[i]) : INFINITY);
  return d;
}

// Raw CUDA's way to record one cuBLASLt call again: capture it into a graph, hand it to the
// executable's child node, launch. The executable holds one child node of the first capture.
class RawRerecord {
 public:
  RawRerecord(int m, int n, int k, const bf16* a, const bf16* b, const float* bias, float* c)
      : m_(m), n_(n), k_(k), a_(a), b_(b), bias_(bias) {
    SAMPLE_CHECK(cudaStreamCreateWithFlags(&capture_, cudaStreamNonBlocking));
    cudaGraph_t body = record(c);
    SAMPLE_CHECK(cudaGraphCreate(&graph_, 0));
    SAMPLE_CHECK(cudaGraphAddChildGraphNode(&node_, graph_, nullptr, 0, body));
    SAMPLE_CHECK(cudaGraphDestroy(body));
    SAMPLE_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~RawRerecord() {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
    cudaStreamDestroy(capture_);
  }
  void step(float* c, cudaStream_t stream) {
    cudaGraph_t body = record(c);
    SAMPLE_CHECK(cudaGraphExecChildGraphNodeSetParams(exec_, node_, body));
    SAMPLE_CHECK(cudaGraphDestroy(body));
    SAMPLE_CHECK(cudaGraphLaunch(exec_, stream));
  }

 private:
  cudaGraph_t record(float* c) {
    SAMPLE_CHECK(cudaStreamBeginCapture(capture_, cudaStreamCaptureModeThreadLocal));
    const int status = fk::cublaslt_matmul_call<bf16, float>(capture_, m_, n_, k_, a_, b_, bias_,
                                                             static_cast<int>(fk::Epilogue::bias), c);
    cudaGraph_t g = nullptr;
    SAMPLE_CHECK(cudaStreamEndCapture(capture_, &g));
    if (status != 0) {
      std::fprintf(stderr, "mlp_bench: cuBLASLt returned %d\n", status);
      std::exit(1);
    }
    return g;
  }
  int m_, n_, k_;
  const bf16 *a_, *b_;
  const float* bias_;
  cudaStream_t capture_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphNode_t node_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> buckets{16, 32, 64, 128};
  int repeats = 500, warmup = 50;
  std::string weights_dir, json_path;
  unsigned seed = 1;
  bool profile = false;
  CLI::App app{"mlp_bench: the serving MLP per batch, flowdsl (cuBLASLt nodes, built-in matmul) against a hand-written cuBLASLt graph"};
  app.add_option("--buckets", buckets, "rows per batch")->delimiter(',');
  app.add_option("--repeats", repeats, "timed launches per figure (median)")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "launches before timing")->check(CLI::NonNegativeNumber);
  app.add_option("--weights", weights_dir, "write w<l>.npy and b<l>.npy here for bench/torch_mlp.py");
  app.add_option("--json", json_path, "write the figures to FILE");
  app.add_option("--seed", seed, "seed of weights and inputs");
  app.add_flag("--profile", profile, "also print flowdsl's profile (CUPTI) of 20 launches of each bucket's graphs");
  CLI11_PARSE(app, argc, argv);
  if (!sample::have_device()) return sample::skipped;
  fk::register_builtins(flowdsl::KernelRegistry::global());

  const Model model = make_model(seed);
  if (!weights_dir.empty()) {
    std::filesystem::create_directories(weights_dir);
    for (std::size_t l = 0; l < model.weights.size(); ++l) {
      flowdsl::cli::write_npy(weights_dir + "/w" + std::to_string(l) + ".npy", flowdsl::ScalarType::f32,
                              model.weights[l].size(), model.weights[l].data());
      flowdsl::cli::write_npy(weights_dir + "/b" + std::to_string(l) + ".npy", flowdsl::ScalarType::f32,
                              model.biases[l].size(), model.biases[l].data());
    }
  }
  const int max_rows = *std::max_element(buckets.begin(), buckets.end());
  const mlp_bench::MlpWeights weights = mlp_bench::upload_weights(model.widths, model.weights, model.biases);
  Activations act(model, max_rows);
  const int classes = model.widths.back();
  mlp_bench::PinnedBuffer<float> in(std::size_t(max_rows) * model.widths[0]);
  const std::vector<float> input = sample::random_floats(in.size(), seed + 7);
  std::copy(input.begin(), input.end(), in.get());
  mlp_bench::PinnedBuffer<float> out_lt(std::size_t(max_rows) * classes), out_builtin(out_lt.size()), out_raw(out_lt.size()),
      out_mapped(out_lt.size());
  cudaStream_t stream = nullptr;
  SAMPLE_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  flowdsl::Runtime runtime;
  bool ok = true;

  nlohmann::ordered_json report;
  std::printf("per batch, GPU time (us, median of %d; events around each launch alone on the stream)\n", repeats);
  std::printf("%6s %12s %12s %12s %14s %10s %14s %14s\n", "rows", "flowdsl_lt", "raw_lt", "builtin", "builtin_mapped",
              "lt/raw", "max|lt-raw|", "max|lt-builtin|");
  for (const int rows : buckets) {
    MlpGraph lt = make_graph(weights, act, Gemm::cublaslt, rows, in.get(), out_lt.get());
    MlpGraph builtin = make_graph(weights, act, Gemm::builtin, rows, in.get(), out_builtin.get());
    MlpGraph mapped = make_graph(weights, act, Gemm::builtin_mapped, rows, in.get(), out_mapped.get());
    mlp_bench::RawCublasLtMlp raw(weights, rows);
    raw.bind(in.get(), out_raw.get());
    const std::vector<double> us = batch_us(stream, warmup, repeats,
                                            {[&] { runtime.launch(lt.graph, stream); }, [&] { raw.launch(stream); },
                                             [&] { runtime.launch(builtin.graph, stream); },
                                             [&] { runtime.launch(mapped.graph, stream); }});
    const double lt_us = us[0], raw_us = us[1], builtin_us = us[2], mapped_us = us[3];
    SAMPLE_CHECK(cudaStreamSynchronize(stream));
    const std::size_t n = std::size_t(rows) * classes;
    const double lt_raw = max_difference(out_lt.get(), out_raw.get(), n);
    const double lt_builtin = max_difference(out_lt.get(), out_builtin.get(), n);
    // The same kernels on the same input: the mapped graph's probabilities equal the copying one's.
    const double builtin_mapped = max_difference(out_builtin.get(), out_mapped.get(), n);
    // Probabilities of one function computed two ways: equal within bf16 rounding of the activations.
    ok = ok && lt_raw <= 1e-6 && lt_builtin <= 2e-2 && builtin_mapped == 0.0;
    std::printf("%6d %12.1f %12.1f %12.1f %14.1f %10.3f %14.2e %14.2e\n", rows, lt_us, raw_us, builtin_us, mapped_us,
                lt_us / raw_us, lt_raw, lt_builtin);
    report["per_batch_us"][std::to_string(rows)] = {{"flowdsl_cublaslt", lt_us},
                                                     {"raw_cublaslt_graph", raw_us},
                                                     {"flowdsl_builtin", builtin_us},
                                                     {"flowdsl_builtin_mapped", mapped_us},
                                                     {"max_diff_builtin_mapped", builtin_mapped},
                                                     {"raw_nodes", raw.node_count()},
                                                     {"max_diff_lt_raw", lt_raw},
                                                     {"max_diff_lt_builtin", lt_builtin}};
  }

  // Recording one library node again: flowdsl (an argument change + launch of a graph of that
  // node) against raw CUDA (capture + cudaGraphExecChildGraphNodeSetParams + launch of a graph of
  // one child node), each iteration synchronised, taking turns.
  {
    const int rows = buckets.front(), k = model.widths[2];
    float* outputs[2] = {act.logits.get(), act.h1f.get()};  // two buffers large enough for the logits
    flowdsl::Graph one;
    auto node = fk::cublaslt_matmul(one, "linear3", rows, classes, k, static_cast<const bf16*>(act.h2.get()),
                                    weights.weights[2].get(), static_cast<const float*>(weights.biases[2].get()),
                                    fk::Epilogue::bias, outputs[0]);
    runtime.launch(one, stream);
    RawRerecord raw(rows, classes, k, act.h2.get(), weights.weights[2].get(), weights.biases[2].get(), outputs[0]);
    const std::uint64_t reinstantiations = runtime.statistics().reinstantiations;
    std::vector<double> flowdsl_times, raw_times;
    for (int i = 0; i < warmup + repeats; ++i) {
      const double f = wall_us(0, 1, [&](int) {
        node.arg<7>(outputs[(i + 1) % 2]);
        runtime.launch(one, stream);
        SAMPLE_CHECK(cudaStreamSynchronize(stream));
      });
      const double r = wall_us(0, 1, [&](int) {
        raw.step(outputs[(i + 1) % 2], stream);
        SAMPLE_CHECK(cudaStreamSynchronize(stream));
      });
      if (i >= warmup) flowdsl_times.push_back(f), raw_times.push_back(r);
    }
    const double flowdsl_us = median(flowdsl_times), raw_us = median(raw_times);
    const std::uint64_t refused = runtime.statistics().reinstantiations - reinstantiations;
    std::printf("\nre-recording one library node + launch (us, median wall time, synchronised): flowdsl %.1f, raw %.1f, "
                "ratio %.2f (reinstantiations %llu)\n",
                flowdsl_us, raw_us, flowdsl_us / raw_us, static_cast<unsigned long long>(refused));
    report["rerecord_us"] = {{"flowdsl", flowdsl_us}, {"raw", raw_us}, {"reinstantiations", refused}};
    ok = ok && refused == 0;
  }

  // Hit launches: the host time of Runtime::launch when nothing changed (nothing is recorded),
  // for the graph of library nodes and the one of kernels, beside raw's cudaGraphLaunch.
  {
    const int rows = buckets.back();
    MlpGraph lt = make_graph(weights, act, Gemm::cublaslt, rows, in.get(), out_lt.get());
    MlpGraph builtin = make_graph(weights, act, Gemm::builtin, rows, in.get(), out_builtin.get());
    mlp_bench::RawCublasLtMlp raw(weights, rows);
    raw.bind(in.get(), out_raw.get());
    const auto host_us = [&](auto&& launch) {
      return wall_us(warmup, repeats, [&](int i) {
        launch();
        if (i % 16 == 15) SAMPLE_CHECK(cudaStreamSynchronize(stream));  // keep the queue short
      });
    };
    runtime.launch(lt.graph, stream);
    runtime.launch(builtin.graph, stream);
    const std::uint64_t updates = runtime.statistics().node_updates;
    const double lt_host = host_us([&] { runtime.launch(lt.graph, stream); });
    const double builtin_host = host_us([&] { runtime.launch(builtin.graph, stream); });
    const double raw_host = host_us([&] { raw.launch(stream); });
    SAMPLE_CHECK(cudaStreamSynchronize(stream));
    const bool recorded_nothing = runtime.statistics().node_updates == updates;
    std::printf("hit launch host time (us, median): library nodes %.2f, kernels %.2f, raw cudaGraphLaunch %.2f; "
                "nothing recorded: %s\n",
                lt_host, builtin_host, raw_host, recorded_nothing ? "yes" : "NO");
    report["hit_launch_host_us"] = {{"flowdsl_cublaslt", lt_host}, {"flowdsl_builtin", builtin_host}, {"raw", raw_host}};
    ok = ok && recorded_nothing;
  }
  // Where a batch's GPU time goes: each node, and each kernel a library node recorded.
  if (profile) {
    flowdsl::Runtime profiled;
    flowdsl::Profiler profiler(profiled);
    for (const int rows : buckets) {
      MlpGraph lt = make_graph(weights, act, Gemm::cublaslt, rows, in.get(), out_lt.get());
      profiler.name(lt.graph, "cuBLASLt MLP, " + std::to_string(rows) + " rows");
      for (int i = 0; i < 21; ++i) profiler.launch(lt.graph, stream);
      MlpGraph builtin = make_graph(weights, act, Gemm::builtin, rows, in.get(), out_builtin.get());
      profiler.name(builtin.graph, "built-in matmul MLP, " + std::to_string(rows) + " rows");
      for (int i = 0; i < 21; ++i) profiler.launch(builtin.graph, stream);
      MlpGraph mapped = make_graph(weights, act, Gemm::builtin_mapped, rows, in.get(), out_mapped.get());
      profiler.name(mapped.graph, "built-in matmul MLP, mapped input and output, " + std::to_string(rows) + " rows");
      for (int i = 0; i < 21; ++i) profiler.launch(mapped.graph, stream);
    }
    std::printf("\n%s", profiler.report().c_str());
  }
  SAMPLE_CHECK(cudaStreamDestroy(stream));
  if (!json_path.empty()) {
    std::FILE* f = std::fopen(json_path.c_str(), "w");
    if (f == nullptr) return 1;
    std::fprintf(f, "%s\n", report.dump(2).c_str());
    std::fclose(f);
  }
  std::printf(ok ? "mlp_bench: results agree\n" : "mlp_bench: FAILED\n");
  return ok ? 0 : 1;
}
