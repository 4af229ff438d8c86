// SPDX-License-Identifier: Apache-2.0
// Programmatic edges: a chain of N small built-in kernels (scale.f32 over 4096 floats, each
// link reading what the one before it wrote) with full edges and with programmatic edges,
// through flowdsl and built by hand with CUDA's graph API, in one process and one run.
// Figure: GPU time of one launch (CUDA events) over N, median of the launches, the four
// variants sampled in turn; then, by hand with full edges, scale.f32 at other launch shapes and a
// bare one-vector-a-thread kernel (where a plain-edge link's time goes). Checked: every variant's output equals the host's, bit for bit
// equal across the variants.
//
//   programmatic_bench [--quick] [--json FILE]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_cuda.hpp"
#include "bench_util.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/device.cuh"
#include "flowdsl/kernels.hpp"
#include "../kernels/elementwise/elementwise.cuh"


namespace fk = flowdsl::kernels;

namespace {

constexpr std::int64_t elements = 4096;  // one block of 256 threads (16 floats a thread): a small kernel

float factor(int link) { return link % 2 == 0 ? 1.0625f : 0.9375f; }

/// Buffers a, b: link i reads one and writes the other.
struct Buffers {
  Buffers() {
    CHECK_CUDA(cudaMalloc(&a, elements * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&b, elements * sizeof(float)));
  }
  ~Buffers() {
    cudaFree(a);
    cudaFree(b);
  }
  float* a = nullptr;
  float* b = nullptr;
};

/// The chain through flowdsl: fk::scale links, their edges full or programmatic.
flowdsl::Graph flowdsl_chain(int links, bool programmatic, const Buffers& buf) {
  flowdsl::Graph g;
  flowdsl::NodeHandle previous{nullptr, 0};
  for (int i = 0; i < links; ++i) {
    const float* from = i % 2 ? buf.b : buf.a;
    float* to = i % 2 ? buf.a : buf.b;
    flowdsl::NodeHandle node = fk::scale(g, "link" + std::to_string(i), elements, factor(i), from, to);
    if (i > 0) {
      if (programmatic) {
        node.after(previous, flowdsl::programmatic);
      } else {
        node.after(previous);
      }
    }
    previous = node;
  }
  return g;
}

/// y = a x with one float4 a thread and nothing else (no alignment peel, no grid stride, no
/// programmatic prologue): the least a link can be, to tell the kernel's cost from the launch's.
__global__ void bare_scale(std::int64_t n, float a, const float* x, float* y) {
  const std::int64_t i = 4 * (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (i + 3 < n) {
    const float4 v = *reinterpret_cast<const float4*>(x + i);
    *reinterpret_cast<float4*>(y + i) = make_float4(a * v.x, a * v.y, a * v.z, a * v.w);
  }
}

/// bare_scale after the programmatic prologue every built-in kernel starts with.
__global__ void bare_scale_prologue(std::int64_t n, float a, const float* x, float* y) {
  flowdsl::device::programmatic_prologue();
  const std::int64_t i = 4 * (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (i + 3 < n) {
    const float4 v = *reinterpret_cast<const float4*>(x + i);
    *reinterpret_cast<float4*>(y + i) = make_float4(a * v.x, a * v.y, a * v.z, a * v.w);
  }
}

/// The built-in scale's body (transform: alignment peel, tail, vectors) without the prologue.
__global__ void transform_scale(std::int64_t n, float a, const float* x, float* y) {
  flowdsl::kernels::detail::transform(n, flowdsl::kernels::detail::ScaleOp{a}, y, x);
}

struct RawKernel {
  const void* function;
  dim3 grid, block;
};

/// The same chain by hand: `kernel` (by default the function and launch shape of flowdsl's
/// first node), the same arguments, programmatic edges added with cudaGraphAddDependencies and
/// their edge data.
flowdsl::NativeGraph raw_chain(int links, bool programmatic, const Buffers& buf, const RawKernel& kernel);
flowdsl::NativeGraph raw_chain(int links, bool programmatic, const Buffers& buf, const flowdsl::Graph& like) {
  const auto& op = std::get<flowdsl::KernelOp>(like.description().nodes[0].op);
  return raw_chain(links, programmatic, buf,
                   RawKernel{op.function, dim3(op.launch.grid.x, op.launch.grid.y, op.launch.grid.z),
                             dim3(op.launch.block.x, op.launch.block.y, op.launch.block.z)});
}
flowdsl::NativeGraph raw_chain(int links, bool programmatic, const Buffers& buf, const RawKernel& kernel) {
  cudaGraph_t graph = nullptr;
  CHECK_CUDA(cudaGraphCreate(&graph, 0));
  flowdsl::NativeGraph owned(graph);
  cudaGraphNode_t previous = nullptr;
  for (int i = 0; i < links; ++i) {
    std::int64_t n = elements;
    float a = factor(i);
    const float* from = i % 2 ? buf.b : buf.a;
    float* to = i % 2 ? buf.a : buf.b;
    void* args[] = {&n, &a, &from, &to};
    cudaKernelNodeParams p{};
    p.func = const_cast<void*>(kernel.function);
    p.gridDim = kernel.grid;
    p.blockDim = kernel.block;
    p.kernelParams = args;
    cudaGraphNode_t node = nullptr;
    const bool full_edge = previous != nullptr && !programmatic;
    CHECK_CUDA(cudaGraphAddKernelNode(&node, graph, full_edge ? &previous : nullptr, full_edge ? 1 : 0, &p));
    if (previous != nullptr && programmatic) {
      cudaGraphEdgeData edge{};
      edge.type = cudaGraphDependencyTypeProgrammatic;
      edge.from_port = cudaGraphKernelNodePortProgrammatic;
      CHECK_CUDA(cudaGraphAddDependencies(graph, &previous, &node, &edge, 1));
    }
    previous = node;
  }
  return owned;
}

std::vector<float> host_chain(std::vector<float> v, int links) {
  for (int i = 0; i < links; ++i) {
    for (float& e : v) e *= factor(i);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<bench::Options> options = bench::parse_options(argc, argv);
  if (!options) return 2;
  const bool quick = options->quick;
  const std::string& json_path = options->json_path;
  if (!bench::has_device()) {
    std::fprintf(stderr, "no CUDA device\n");
    return 77;
  }
  const int links = quick ? 100 : 1000;
  const int reps = quick ? 5 : 31;
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  Buffers buf;
  std::vector<float> input(elements);
  for (std::int64_t i = 0; i < elements; ++i) input[i] = 1.0f + 0.001f * static_cast<float>(i % 977);

  const flowdsl::Graph flow_full = flowdsl_chain(links, false, buf), flow_early = flowdsl_chain(links, true, buf);
  const flowdsl::NativeGraph raw_full_graph = raw_chain(links, false, buf, flow_full);
  const flowdsl::NativeGraph raw_early_graph = raw_chain(links, true, buf, flow_full);
  const flowdsl::NativeExecutable raw_full = bench::instantiate_uploaded(raw_full_graph.get(), stream.get());
  const flowdsl::NativeExecutable raw_early = bench::instantiate_uploaded(raw_early_graph.get(), stream.get());
  flowdsl::Runtime runtime;

  const char* names[4] = {"raw, full edges", "raw, programmatic edges", "flowdsl, full edges", "flowdsl, programmatic edges"};
  auto launch = [&](int variant) {
    switch (variant) {
      case 0: CHECK_CUDA(cudaGraphLaunch(raw_full.get(), stream.get())); break;
      case 1: CHECK_CUDA(cudaGraphLaunch(raw_early.get(), stream.get())); break;
      case 2: runtime.launch(flow_full, stream); break;
      default: runtime.launch(flow_early, stream); break;
    }
  };

  // Correctness first: every variant from the same input, outputs compared.
  const std::vector<float> want = host_chain(input, links);
  float* out = links % 2 ? buf.b : buf.a;
  std::vector<float> first;
  bool ok = true;
  for (int v = 0; v < 4; ++v) {
    // On the stream that runs the graph: a legacy-stream copy or fill would race the launch on
    // this non-blocking stream.
    CHECK_CUDA(cudaMemcpyAsync(buf.a, input.data(), elements * sizeof(float), cudaMemcpyHostToDevice, stream.get()));
    CHECK_CUDA(cudaMemsetAsync(buf.b, 0xff, elements * sizeof(float), stream.get()));
    launch(v);
    CHECK_CUDA(cudaStreamSynchronize(stream.get()));
    std::vector<float> got(elements);
    CHECK_CUDA(cudaMemcpyAsync(got.data(), out, elements * sizeof(float), cudaMemcpyDeviceToHost, stream.get()));
    CHECK_CUDA(cudaStreamSynchronize(stream.get()));
    if (v == 0) first = got;
    const bool same = std::memcmp(got.data(), first.data(), elements * sizeof(float)) == 0;
    std::size_t wrong = 0;
    for (std::int64_t i = 0; i < elements; ++i) wrong += !(std::fabs(got[i] - want[i]) <= 1e-4f * std::fabs(want[i]));
    if (!same || wrong != 0) {
      std::fprintf(stderr, "%s: %zu elements off the host's, %s the first variant's bytes\n", names[v], wrong,
                   same ? "equal to" : "unlike");
      ok = false;
    }
  }

  // Timing: the four in turn, each launch timed alone with events.
  const flowdsl::EventHandle start = flowdsl::make_event(), stop = flowdsl::make_event();
  std::vector<double> us[4];
  for (int r = 0; r < reps + 2; ++r) {
    for (int v = 0; v < 4; ++v) {
      CHECK_CUDA(cudaEventRecord(start.get(), stream.get()));
      launch(v);
      CHECK_CUDA(cudaEventRecord(stop.get(), stream.get()));
      CHECK_CUDA(cudaEventSynchronize(stop.get()));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
      if (r >= 2) us[v].push_back(1000.0 * ms / links);
    }
  }
  // Where a plain-edge link's time goes: the same chain by hand with full edges, the built-in
  // function at other launch shapes and a bare kernel, each checked against the host, timed in turn.
  const auto& scale_op = std::get<flowdsl::KernelOp>(flow_full.description().nodes[0].op);
  const RawKernel shapes[] = {{scale_op.function, dim3(1), dim3(256)},   {scale_op.function, dim3(4), dim3(256)},
                              {scale_op.function, dim3(8), dim3(128)},   {scale_op.function, dim3(16), dim3(64)},
                              {reinterpret_cast<const void*>(bare_scale), dim3(4), dim3(256)},
                              {reinterpret_cast<const void*>(bare_scale), dim3(8), dim3(128)},
                              {reinterpret_cast<const void*>(bare_scale_prologue), dim3(4), dim3(256)},
                              {reinterpret_cast<const void*>(transform_scale), dim3(4), dim3(256)}};
  const char* shape_names[] = {"scale.f32, 1 x 256", "scale.f32, 4 x 256", "scale.f32, 8 x 128", "scale.f32, 16 x 64",
                               "bare kernel, 4 x 256", "bare kernel, 8 x 128", "bare + prologue, 4 x 256",
                               "scale's body, no prologue, 4 x 256"};
  constexpr int shape_count = sizeof(shapes) / sizeof(shapes[0]);
  std::vector<flowdsl::NativeGraph> shape_graphs;
  std::vector<flowdsl::NativeExecutable> shape_execs;
  for (const RawKernel& k : shapes) {
    shape_graphs.push_back(raw_chain(links, false, buf, k));
    shape_execs.push_back(bench::instantiate_uploaded(shape_graphs.back().get(), stream.get()));
  }
  for (int v = 0; v < shape_count; ++v) {
    // On the stream that runs the graph: a legacy-stream copy or fill would race the launch on
    // this non-blocking stream.
    CHECK_CUDA(cudaMemcpyAsync(buf.a, input.data(), elements * sizeof(float), cudaMemcpyHostToDevice, stream.get()));
    CHECK_CUDA(cudaMemsetAsync(buf.b, 0xff, elements * sizeof(float), stream.get()));
    CHECK_CUDA(cudaGraphLaunch(shape_execs[v].get(), stream.get()));
    CHECK_CUDA(cudaStreamSynchronize(stream.get()));
    std::vector<float> got(elements);
    CHECK_CUDA(cudaMemcpyAsync(got.data(), out, elements * sizeof(float), cudaMemcpyDeviceToHost, stream.get()));
    CHECK_CUDA(cudaStreamSynchronize(stream.get()));
    std::size_t wrong = 0;
    for (std::int64_t i = 0; i < elements; ++i) wrong += !(std::fabs(got[i] - want[i]) <= 1e-4f * std::fabs(want[i]));
    if (wrong != 0) {
      std::fprintf(stderr, "%s: %zu elements off the host's\n", shape_names[v], wrong);
      ok = false;
    }
  }
  std::vector<double> shape_us[shape_count];
  for (int r = 0; r < reps + 2; ++r) {
    for (int v = 0; v < shape_count; ++v) {
      CHECK_CUDA(cudaEventRecord(start.get(), stream.get()));
      CHECK_CUDA(cudaGraphLaunch(shape_execs[v].get(), stream.get()));
      CHECK_CUDA(cudaEventRecord(stop.get(), stream.get()));
      CHECK_CUDA(cudaEventSynchronize(stop.get()));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
      if (r >= 2) shape_us[v].push_back(1000.0 * ms / links);
    }
  }
  const flowdsl::RuntimeStatistics st = runtime.statistics();
  std::printf("chain of %d scale.f32 kernels (%lld floats each), GPU us per node (median of %d launches)\n", links,
              static_cast<long long>(elements), reps);
  std::vector<bench::Figure> figures;
  for (int v = 0; v < 4; ++v) {
    std::printf("  %-32s %8.3f\n", names[v], bench::median(us[v]));
    figures.push_back(bench::Figure{"chain, GPU per node", names[v], links, 1, 0, bench::median(us[v])});
  }
  std::printf("by hand, full edges, other kernels and launch shapes (GPU us per node):\n");
  for (int v = 0; v < shape_count; ++v) {
    std::printf("  %-32s %8.3f\n", shape_names[v], bench::median(shape_us[v]));
    figures.push_back(bench::Figure{"chain, GPU per node", shape_names[v], links, 1, 0, bench::median(shape_us[v])});
  }
  const double raw_gain = bench::median(us[0]) / bench::median(us[1]);
  const double flow_gain = bench::median(us[2]) / bench::median(us[3]);
  std::printf("programmatic gain: raw %.2fx, flowdsl %.2fx (goal >= 1.25x); flowdsl programmatic / raw programmatic %.3f\n",
              raw_gain, flow_gain, bench::median(us[3]) / bench::median(us[1]));
  std::printf("cache: launches=%llu misses=%llu node_updates=%llu\n", static_cast<unsigned long long>(st.launches),
              static_cast<unsigned long long>(st.misses), static_cast<unsigned long long>(st.node_updates));
  std::printf(ok ? "results verified: every variant computed the host's values, the same bytes\n"
                 : "RESULTS WRONG\n");
  if (!json_path.empty()) {
    bench::write_json(json_path, bench::device_header("programmatic"), figures);
  }
  return ok ? 0 : 1;
}
