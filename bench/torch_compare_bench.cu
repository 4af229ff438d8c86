// SPDX-License-Identifier: Apache-2.0
// flowdsl's side of the comparison with PyTorch's CUDA graphs (bench/torch_compare.py runs both):
// a chain of N built-in scale.f32 kernels, each scaling the same small buffer in place (the
// work of PyTorch's x.mul_(a) on a float32 tensor of as many elements), with plain edges and
// with Graph::programmatic_edges(true).
// Figures per N and variant: the host time of building (declare, plan() = validate + lower,
// the first Runtime::launch = emit + instantiate with upload + launch; median of --builds, each
// on a cleared runtime that has launched before), the GPU time of a replay (CUDA events around
// a cache-hit launch, median of --replays) and the host time of that launch call, and the same
// kernels launched one by one (flowdsl::launch_eagerly). Checked: after the first launch of
// every build and after the last replay, the buffer equals the host's chain of float products.
//
//   torch_compare_bench [--n 100,1000,2000] [--elements 4096] [--builds 5] [--replays 50] [--json FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_cuda.hpp"
#include "bench_util.hpp"
#include "flowdsl/eager.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/kernels.hpp"

namespace fk = flowdsl::kernels;

namespace {

struct Options {
  std::vector<int> sizes{100, 1000, 2000};
  std::int64_t elements = 4096;
  int builds = 5;
  int replays = 50;
  std::string json_path;
};

std::optional<std::vector<int>> parse_sizes(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p != '\0';) {
    char* end = nullptr;
    const long n = std::strtol(p, &end, 10);
    if (end == p || n <= 0 || n > 1000000) return std::nullopt;
    out.push_back(static_cast<int>(n));
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') return std::nullopt;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options out;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--n") == 0 && has_value) {
      std::optional<std::vector<int>> sizes = parse_sizes(argv[++i]);
      if (!sizes) return std::nullopt;
      out.sizes = *sizes;
    } else if (std::strcmp(argv[i], "--elements") == 0 && has_value) {
      out.elements = std::atoll(argv[++i]);
      if (out.elements <= 0) return std::nullopt;
    } else if (std::strcmp(argv[i], "--builds") == 0 && has_value) {
      out.builds = std::atoi(argv[++i]);
      if (out.builds <= 0) return std::nullopt;
    } else if (std::strcmp(argv[i], "--replays") == 0 && has_value) {
      out.replays = std::atoi(argv[++i]);
      if (out.replays <= 0) return std::nullopt;
    } else if (std::strcmp(argv[i], "--json") == 0 && has_value) {
      out.json_path = argv[++i];
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// The factors of PyTorch's side (bench/torch_compare.py): exact in float, products near 1.
float factor(int link) { return link % 2 == 0 ? 1.0625f : 0.9375f; }

// The input of PyTorch's side: 1 + 0.001 * (i % 977), each step rounded to float as there.
std::vector<float> make_input(std::int64_t elements) {
  std::vector<float> v(static_cast<std::size_t>(elements));
  for (std::int64_t i = 0; i < elements; ++i) v[i] = 1.0f + 0.001f * static_cast<float>(i % 977);
  return v;
}

std::vector<float> host_chain(std::vector<float> v, int links) {
  for (int i = 0; i < links; ++i) {
    for (float& e : v) e *= factor(i);
  }
  return v;
}

void declare_chain(flowdsl::Graph& g, int links, bool programmatic, std::int64_t elements, float* x) {
  g.programmatic_edges(programmatic);
  flowdsl::NodeHandle previous{nullptr, 0};
  for (int i = 0; i < links; ++i) {
    flowdsl::NodeHandle node = fk::scale(g, "mul" + std::to_string(i), elements, factor(i), x, x);
    if (i > 0) node.after(previous);
    previous = node;
  }
}

// What a check found: the largest relative error against the host and the sum of the result.
struct Check {
  double max_rel_error = 0;
  double sum = 0;
  bool ok = true;
};

Check check_result(const float* device, const std::vector<float>& want) {
  std::vector<float> got(want.size());
  CHECK_CUDA(cudaMemcpy(got.data(), device, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  Check c;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]) / std::fabs(static_cast<double>(want[i]));
    c.max_rel_error = std::max(c.max_rel_error, std::isnan(err) ? 1.0 : err);
    c.sum += got[i];
  }
  c.ok = c.max_rel_error <= 1e-5;
  return c;
}

struct Variant {
  const char* name;
  bool programmatic;
};

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Options> options = parse_options(argc, argv);
  if (!options) {
    std::fprintf(stderr,
                 "usage: %s [--n 100,1000,2000] [--elements 4096] [--builds 5] [--replays 50] [--json FILE]\n",
                 argv[0]);
    return 2;
  }
  if (!bench::has_device()) {
    std::fprintf(stderr, "no CUDA device\n");
    return 77;
  }
  const std::int64_t elements = options->elements;
  const std::size_t bytes = static_cast<std::size_t>(elements) * sizeof(float);
  const std::vector<float> input = make_input(elements);
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  const flowdsl::EventHandle start = flowdsl::make_event(), stop = flowdsl::make_event();
  float* x = nullptr;
  float* other = nullptr;  // what the first link reads in the swap figure
  CHECK_CUDA(cudaMalloc(&x, bytes));
  CHECK_CUDA(cudaMalloc(&other, bytes));
  CHECK_CUDA(cudaMemcpyAsync(other, input.data(), bytes, cudaMemcpyHostToDevice, stream.get()));  // the graphs' stream
  auto reset = [&] { CHECK_CUDA(cudaMemcpyAsync(x, input.data(), bytes, cudaMemcpyHostToDevice, stream.get())); };

  // One runtime for the whole run, warmed up once: it reads the device's limits and the
  // kernel's attributes once, as a long-lived runtime does; each build starts it cleared.
  flowdsl::Runtime runtime;
  {
    flowdsl::Graph warm;
    declare_chain(warm, 2, false, elements, x);
    runtime.launch(warm, stream);
    flowdsl::launch_eagerly(warm, stream.get());
    CHECK_CUDA(cudaStreamSynchronize(stream.get()));
  }

  const Variant variants[] = {{"flowdsl", false}, {"flowdsl, programmatic", true}};
  std::vector<bench::Figure> figures;
  std::string checks;
  bool ok = true;
  for (const int n : options->sizes) {
    const std::vector<float> want = host_chain(input, n);
    for (const Variant& variant : variants) {
      std::vector<double> declare, lower, first, total;
      std::unique_ptr<flowdsl::Graph> kept;  // the last build's graph, replayed
      Check build_check;
      for (int rep = 0; rep < options->builds; ++rep) {
        runtime.clear();
        kept.reset();
        reset();
        CHECK_CUDA(cudaStreamSynchronize(stream.get()));
        const double t0 = bench::now_us();
        auto g = std::make_unique<flowdsl::Graph>();
        declare_chain(*g, n, variant.programmatic, elements, x);
        const double t1 = bench::now_us();
        (void)g->plan();
        const double t2 = bench::now_us();
        runtime.launch(*g, stream);
        const double t3 = bench::now_us();
        CHECK_CUDA(cudaStreamSynchronize(stream.get()));
        declare.push_back(t1 - t0);
        lower.push_back(t2 - t1);
        first.push_back(t3 - t2);
        total.push_back(t3 - t0);
        const Check c = check_result(x, want);
        if (!c.ok) {
          std::fprintf(stderr, "%s, N = %d, build %d: relative error %.3g against the host\n", variant.name, n, rep,
                       c.max_rel_error);
          ok = false;
        }
        build_check = c;
        kept = std::move(g);
      }

      std::vector<double> replay_gpu, replay_call;
      for (int r = 0; r < options->replays + 2; ++r) {
        reset();
        CHECK_CUDA(cudaEventRecord(start.get(), stream.get()));
        const double h0 = bench::now_us();
        const flowdsl::LaunchReport report = runtime.launch(*kept, stream);
        const double h1 = bench::now_us();
        CHECK_CUDA(cudaEventRecord(stop.get(), stream.get()));
        CHECK_CUDA(cudaEventSynchronize(stop.get()));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
        if (report.kind != flowdsl::LaunchKind::hit) {
          std::fprintf(stderr, "%s, N = %d: a replay was not a cache hit (%s)\n", variant.name, n,
                       flowdsl::to_string(report.kind));
          ok = false;
        }
        if (r < 2) continue;
        replay_gpu.push_back(1000.0 * ms);
        replay_call.push_back(h1 - h0);
      }
      const Check replay_check = check_result(x, want);
      ok = ok && replay_check.ok;

      std::vector<double> eager_gpu, eager_host;
      if (!variant.programmatic) {  // the same kernels one by one: programmatic edges do not apply
        for (int r = 0; r < 5; ++r) {
          reset();
          CHECK_CUDA(cudaEventRecord(start.get(), stream.get()));
          const double h0 = bench::now_us();
          flowdsl::launch_eagerly(*kept, stream.get());
          const double h1 = bench::now_us();
          CHECK_CUDA(cudaEventRecord(stop.get(), stream.get()));
          CHECK_CUDA(cudaEventSynchronize(stop.get()));
          float ms = 0;
          CHECK_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
          if (r == 0) continue;
          eager_gpu.push_back(1000.0 * ms);
          eager_host.push_back(h1 - h0);
        }
        const Check eager_check = check_result(x, want);
        ok = ok && eager_check.ok;
      }

      // A tensor swap, as Python's Node.set(x=...) makes it: the first link reads another buffer,
      // then x again, each a parameter change and a launch (host time of both together).
      std::vector<double> swap_call;
      if (!variant.programmatic) {
        auto link = kept->node<flowdsl::KernelNode<std::int64_t, float, const float*, float*>>("mul0");
        for (int r = 0; r < options->replays + 2; ++r) {
          CHECK_CUDA(cudaStreamSynchronize(stream.get()));
          const double h0 = bench::now_us();
          link.arg<2>(r % 2 == 0 ? other : x);
          const flowdsl::LaunchReport report = runtime.launch(*kept, stream);
          const double h1 = bench::now_us();
          if (report.kind != flowdsl::LaunchKind::updated || report.nodes_updated != 1) {
            std::fprintf(stderr, "%s, N = %d: a swap was not a one-node update (%s)\n", variant.name, n,
                         flowdsl::to_string(report.kind));
            ok = false;
          }
          if (r >= 2) swap_call.push_back(h1 - h0);
        }
        link.arg<2>(x);
        CHECK_CUDA(cudaStreamSynchronize(stream.get()));
      }

      const std::string v = variant.name;
      if (!swap_call.empty()) figures.push_back({"swap + launch, host", v, n, 1, 0, bench::median(swap_call)});
      figures.push_back({"build, host", v, n, 1, 0, bench::median(total)});
      figures.push_back({"declare, host", v, n, 1, 0, bench::median(declare)});
      figures.push_back({"validate + lower, host", v, n, 1, 0, bench::median(lower)});
      figures.push_back({"first launch, host", v, n, 1, 0, bench::median(first)});
      figures.push_back({"replay, gpu", v, n, 1, 0, bench::median(replay_gpu)});
      figures.push_back({"replay call, host", v, n, 1, 0, bench::median(replay_call)});
      if (!eager_gpu.empty()) {
        figures.push_back({"eager, gpu", v, n, 1, 0, bench::median(eager_gpu)});
        figures.push_back({"eager, host", v, n, 1, 0, bench::median(eager_host)});
      }
      std::printf("N = %5d  %-22s build %9.1f us (%6.2f us a kernel)  replay %8.1f us GPU (%5.3f us a kernel)%s\n",
                  n, variant.name, bench::median(total), bench::median(total) / n, bench::median(replay_gpu),
                  bench::median(replay_gpu) / n, build_check.ok && replay_check.ok ? "" : "  WRONG RESULT");
      char line[256];
      std::snprintf(line, sizeof line,
                    "%s    {\"n\": %d, \"variant\": \"%s\", \"result_sum\": %.9g, \"max_rel_error\": %.3g, \"ok\": %s}",
                    checks.empty() ? "" : ",\n", n, variant.name, build_check.sum,
                    std::max(build_check.max_rel_error, replay_check.max_rel_error),
                    build_check.ok && replay_check.ok ? "true" : "false");
      checks += line;
    }
  }
  CHECK_CUDA(cudaFree(x));
  CHECK_CUDA(cudaFree(other));
  std::printf(ok ? "results verified: every build and replay computed the host's chain of products\n"
                 : "RESULTS WRONG\n");
  if (!options->json_path.empty()) {
    const std::string header = bench::device_header("torch_compare") + "  \"elements\": " +
                               std::to_string(elements) + ",\n  \"builds\": " + std::to_string(options->builds) +
                               ",\n  \"replays\": " + std::to_string(options->replays) + ",\n  \"verified\": " +
                               (ok ? "true" : "false") + ",\n  \"checks\": [\n" + checks + "\n  ],\n";
    bench::write_json(options->json_path, header, figures);
  }
  return ok ? 0 : 1;
}
