// SPDX-License-Identifier: Apache-2.0
// Conditional nodes: flowdsl side by side with hand-written CUDA graph code, in one process and
// one run.
//  - WHILE iteration, GPU: a WHILE whose body is one small kernel that also sets the loop's
//    condition, and one whose body is a small kernel and a deciding kernel, each iterating N
//    times per launch; event time per launch over N.
//  - Hit launch, host: a graph holding a kernel, a child graph and an IF node, launched with
//    nothing changed: Runtime::launch against cudaGraphLaunch of the same graph built by hand.
// Every variant's results are checked (iteration counts, sums) after it is timed.
//
//   conditional_bench [--quick] [--json FILE]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_cuda.hpp"
#include "bench_util.hpp"
#include "flowdsl/flowdsl.hpp"


namespace {

constexpr int threads = 32;  // one block of one warp, as the condition kernels run

/// One iteration that decides for itself: counter += 1, go on while counter < limit.
__global__ void step_and_decide(int* counter, int limit, flowdsl::Condition loop) {
  if (threadIdx.x == 0) {
    const int c = *counter + 1;
    *counter = c;
    loop.set(c < limit ? 1u : 0u);
  }
}
__global__ void step(int* counter) {
  if (threadIdx.x == 0) *counter += 1;
}
__global__ void decide(const int* counter, int limit, flowdsl::Condition loop) {
  if (threadIdx.x == 0) loop.set(*counter < limit ? 1u : 0u);
}
/// The reference workload of flowdsl_bench: each thread adds v to one float.
__global__ void tiny(float* p, float v) { p[threadIdx.x] += v; }

std::vector<bench::Figure> figures;

void record(const char* figure, const char* variant, int n, int width, double us) {
  figures.push_back(bench::Figure{figure, variant, n, width, 0, us});
}

/// Median event times (µs) of `a` and `b` on `stream`, sampled alternately.
template <class A, class B>
std::pair<double, double> gpu_pair_us(int reps, cudaStream_t stream, A&& a, B&& b) {
  const flowdsl::EventHandle start = flowdsl::make_event(), stop = flowdsl::make_event();
  std::vector<double> ta, tb;
  for (int i = 0; i < reps + 2; ++i) {
    for (int which = 0; which < 2; ++which) {
      CHECK_CUDA(cudaEventRecord(start.get(), stream));
      if (which == 0) {
        a();
      } else {
        b();
      }
      CHECK_CUDA(cudaEventRecord(stop.get(), stream));
      CHECK_CUDA(cudaEventSynchronize(stop.get()));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
      if (i >= 2) (which == 0 ? ta : tb).push_back(1000.0 * ms);
    }
  }
  return {bench::median(ta), bench::median(tb)};
}

/// Median host times (µs) of `a` and `b` alone, sampled alternately; the stream is drained before
/// each sample, so that no launch waits for a full queue.
template <class A, class B>
std::pair<double, double> host_pair_us(int reps, cudaStream_t stream, A&& a, B&& b) {
  std::vector<double> ta, tb;
  for (int i = 0; i < reps + 3; ++i) {
    for (int which = 0; which < 2; ++which) {
      CHECK_CUDA(cudaStreamSynchronize(stream));
      const double t0 = bench::now_us();
      if (which == 0) {
        a();
      } else {
        b();
      }
      const double t1 = bench::now_us();
      if (i >= 3) (which == 0 ? ta : tb).push_back(t1 - t0);
    }
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  return {bench::median(ta), bench::median(tb)};
}

cudaGraphNode_t add_kernel(cudaGraph_t graph, const cudaGraphNode_t* dep, const void* function, void** args) {
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(function);
  p.gridDim = dim3(1);
  p.blockDim = dim3(threads);
  p.kernelParams = args;
  cudaGraphNode_t node = nullptr;
  CHECK_CUDA(cudaGraphAddKernelNode(&node, graph, dep, dep ? 1 : 0, &p));
  return node;
}

/// Adds a conditional node after `dep` and returns the graph of its (first) body.
cudaGraph_t add_conditional(cudaGraph_t graph, cudaGraphNode_t dep, cudaGraphConditionalNodeType type, unsigned default_value) {
  cudaGraphConditionalHandle handle = 0;
  CHECK_CUDA(cudaGraphConditionalHandleCreate(&handle, graph, default_value, cudaGraphCondAssignDefault));
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle;
  params.conditional.type = type;
  params.conditional.size = 1;
  cudaGraphNode_t node = nullptr;
  CHECK_CUDA(cudaGraphAddNode(&node, graph, &dep, nullptr, 1, &params));
  return params.conditional.phGraph_out[0];
}

// ---------------------------------------------------------------- WHILE iterations ------------

/// counter = 0, then WHILE (starting at 1) [the body] until counter reaches `limit`; the body is
/// step_and_decide, or step then decide.
struct WhileGraphs {
  WhileGraphs(int limit_, bool two_kernels, cudaStream_t stream) : limit(limit_) {
    CHECK_CUDA(cudaMalloc(&counter, 2 * sizeof(int)));
    int* flow_counter = counter;
    int* raw_counter = counter + 1;

    auto zero = flow.memset("zero", flow_counter, 0, 1, 4);
    auto loop = flow.while_loop("loop", flowdsl::ConditionDefault{1}).after(zero);
    if (two_kernels) {
      auto s = loop.body().kernel("step", step).launch(1, threads).args(flow_counter);
      loop.body().kernel("decide", decide).launch(1, threads).args(flow_counter, limit, loop.condition()).after(s);
    } else {
      loop.body().kernel("step", step_and_decide).launch(1, threads).args(flow_counter, limit, loop.condition());
    }

    CHECK_CUDA(cudaGraphCreate(&raw_graph, 0));
    cudaMemsetParams memset{};
    memset.dst = raw_counter;
    memset.elementSize = 4;
    memset.width = 1;
    memset.height = 1;
    memset.value = 0;
    cudaGraphNode_t raw_zero = nullptr;
    CHECK_CUDA(cudaGraphAddMemsetNode(&raw_zero, raw_graph, nullptr, 0, &memset));
    cudaGraph_t body = nullptr;
    {
      cudaGraphConditionalHandle handle = 0;
      CHECK_CUDA(cudaGraphConditionalHandleCreate(&handle, raw_graph, 1, cudaGraphCondAssignDefault));
      cudaGraphNodeParams params{};
      params.type = cudaGraphNodeTypeConditional;
      params.conditional.handle = handle;
      params.conditional.type = cudaGraphCondTypeWhile;
      params.conditional.size = 1;
      cudaGraphNode_t node = nullptr;
      CHECK_CUDA(cudaGraphAddNode(&node, raw_graph, &raw_zero, nullptr, 1, &params));
      body = params.conditional.phGraph_out[0];
      condition = flowdsl::Condition{handle};
    }
    int* c = raw_counter;
    int l = limit;
    if (two_kernels) {
      void* step_args[] = {&c};
      const cudaGraphNode_t s = add_kernel(body, nullptr, reinterpret_cast<const void*>(step), step_args);
      void* decide_args[] = {&c, &l, &condition};
      add_kernel(body, &s, reinterpret_cast<const void*>(decide), decide_args);
    } else {
      void* args[] = {&c, &l, &condition};
      add_kernel(body, nullptr, reinterpret_cast<const void*>(step_and_decide), args);
    }
    raw_exec = bench::instantiate_uploaded(raw_graph, stream);
  }
  ~WhileGraphs() {
    raw_exec.reset();
    cudaGraphDestroy(raw_graph);
    cudaFree(counter);
  }
  /// Both counters must hold `limit` after a launch of each.
  bool verify(const char* who) const {
    int got[2] = {0, 0};
    CHECK_CUDA(cudaMemcpy(got, counter, sizeof got, cudaMemcpyDeviceToHost));
    if (got[0] == limit && got[1] == limit) return true;
    std::fprintf(stderr, "%s: WHILE counted flowdsl %d, raw %d; expected %d\n", who, got[0], got[1], limit);
    return false;
  }

  int limit;
  int* counter = nullptr;  // [0]: flowdsl's, [1]: raw's
  flowdsl::Graph flow;
  cudaGraph_t raw_graph = nullptr;
  flowdsl::Condition condition;
  flowdsl::NativeExecutable raw_exec;
};

bool bench_while(int iterations, bool two_kernels, int reps) {
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  WhileGraphs w(iterations, two_kernels, stream.get());
  flowdsl::Runtime runtime;
  runtime.launch(w.flow, stream.get());  // instantiate
  CHECK_CUDA(cudaGraphLaunch(w.raw_exec.get(), stream.get()));
  CHECK_CUDA(cudaStreamSynchronize(stream.get()));
  bool ok = w.verify("first launch");
  const auto [raw_us, flow_us] = gpu_pair_us(
      reps, stream.get(), [&] { CHECK_CUDA(cudaGraphLaunch(w.raw_exec.get(), stream.get())); },
      [&] { runtime.launch(w.flow, stream.get()); });
  CHECK_CUDA(cudaGetLastError());
  ok = w.verify("after timing") && ok;
  const int width = two_kernels ? 2 : 1;
  record("while iteration gpu", "raw", iterations, width, raw_us / iterations);
  record("while iteration gpu", "flowdsl", iterations, width, flow_us / iterations);
  const flowdsl::RuntimeStatistics st = runtime.statistics();
  if (st.misses != 1 || st.node_updates != 0) {
    std::fprintf(stderr, "WHILE: unexpected cache activity: misses=%llu node_updates=%llu\n",
                 static_cast<unsigned long long>(st.misses), static_cast<unsigned long long>(st.node_updates));
    ok = false;
  }
  return ok;
}

// ---------------------------------------------------------------- hit launch -------------------

/// first -> child [inner1 -> inner2] -> IF (default 1) [then]: four tiny kernels, each adding 1
/// to its own 32 floats; flowdsl's and raw's on separate buffers.
struct NestedGraphs {
  explicit NestedGraphs(cudaStream_t stream) {
    CHECK_CUDA(cudaMalloc(&buffers, 2 * 4 * threads * sizeof(float)));
    CHECK_CUDA(cudaMemset(buffers, 0, 2 * 4 * threads * sizeof(float)));
    CHECK_CUDA(cudaDeviceSynchronize());
    float* f = buffers;  // flowdsl's: four slots of 32 floats
    auto first = flow.kernel("first", tiny).launch(1, threads).args(f, 1.0f);
    auto stage = flow.child("stage").after(first);
    auto inner1 = stage.body().kernel("inner1", tiny).launch(1, threads).args(f + threads, 1.0f);
    stage.body().kernel("inner2", tiny).launch(1, threads).args(f + 2 * threads, 1.0f).after(inner1);
    auto gate = flow.if_then("gate", flowdsl::ConditionDefault{1}).after(stage);
    gate.body().kernel("then", tiny).launch(1, threads).args(f + 3 * threads, 1.0f);

    float* r = buffers + 4 * threads;  // raw's
    float one = 1.0f;
    float* p[4] = {r, r + threads, r + 2 * threads, r + 3 * threads};
    CHECK_CUDA(cudaGraphCreate(&raw_graph, 0));
    void* a0[] = {&p[0], &one};
    const cudaGraphNode_t n0 = add_kernel(raw_graph, nullptr, reinterpret_cast<const void*>(tiny), a0);
    cudaGraph_t child = nullptr;
    CHECK_CUDA(cudaGraphCreate(&child, 0));
    void* a1[] = {&p[1], &one};
    const cudaGraphNode_t c1 = add_kernel(child, nullptr, reinterpret_cast<const void*>(tiny), a1);
    void* a2[] = {&p[2], &one};
    add_kernel(child, &c1, reinterpret_cast<const void*>(tiny), a2);
    cudaGraphNode_t n1 = nullptr;
    CHECK_CUDA(cudaGraphAddChildGraphNode(&n1, raw_graph, &n0, 1, child));  // clones the child
    CHECK_CUDA(cudaGraphDestroy(child));
    cudaGraph_t then = add_conditional(raw_graph, n1, cudaGraphCondTypeIf, 1);
    void* a3[] = {&p[3], &one};
    add_kernel(then, nullptr, reinterpret_cast<const void*>(tiny), a3);
    raw_exec = bench::instantiate_uploaded(raw_graph, stream);
  }
  ~NestedGraphs() {
    raw_exec.reset();
    cudaGraphDestroy(raw_graph);
    cudaFree(buffers);
  }
  /// After `flow_launches` and `raw_launches`, every float of each variant's four slots holds
  /// its count.
  bool verify(int flow_launches, int raw_launches) const {
    std::vector<float> host(2 * 4 * threads);
    CHECK_CUDA(cudaMemcpy(host.data(), buffers, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < host.size(); ++i) {
      const int want = i < 4 * threads ? flow_launches : raw_launches;
      if (host[i] != static_cast<float>(want)) {
        std::fprintf(stderr, "nested graph: %s slot %zu holds %g, expected %d\n", i < 4 * threads ? "flowdsl" : "raw",
                     (i % (4 * threads)) / threads, host[i], want);
        return false;
      }
    }
    return true;
  }

  float* buffers = nullptr;
  flowdsl::Graph flow;
  cudaGraph_t raw_graph = nullptr;
  flowdsl::NativeExecutable raw_exec;
};

bool bench_hit_launch(int reps) {
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  NestedGraphs n(stream.get());
  flowdsl::Runtime runtime;
  runtime.launch(n.flow, stream.get());  // instantiate
  CHECK_CUDA(cudaGraphLaunch(n.raw_exec.get(), stream.get()));
  int launches = 1;
  const auto [raw_us, flow_us] = host_pair_us(
      reps, stream.get(), [&] { CHECK_CUDA(cudaGraphLaunch(n.raw_exec.get(), stream.get())); },
      [&] {
        runtime.launch(n.flow, stream.get());
        ++launches;
      });
  CHECK_CUDA(cudaGetLastError());
  record("hit launch host", "raw", 4, 0, raw_us);
  record("hit launch host", "flowdsl", 4, 0, flow_us);
  bool ok = n.verify(launches, launches);
  const flowdsl::RuntimeStatistics st = runtime.statistics();
  if (st.misses != 1 || st.hits != static_cast<std::uint64_t>(launches - 1)) {
    std::fprintf(stderr, "hit launch: unexpected cache activity: misses=%llu hits=%llu\n",
                 static_cast<unsigned long long>(st.misses), static_cast<unsigned long long>(st.hits));
    ok = false;
  }
  return ok;
}

double find(const char* figure, const char* variant, int n, int width) {
  for (const auto& f : figures) {
    if (f.figure == figure && f.variant == variant && f.n == n && f.width == width) return f.us;
  }
  return 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<bench::Options> options = bench::parse_options(argc, argv);
  if (!options) return 2;
  const bool quick = options->quick;
  const std::string& json_path = options->json_path;
  if (!bench::has_device()) {
    std::printf("no CUDA device: the conditional benchmark needs one\n");
    return 2;
  }
  const int iterations = quick ? 100 : 1000;
  const int while_reps = quick ? 5 : 31;
  const int launch_reps = quick ? 50 : 2000;
  const std::string header = bench::device_header("conditional");
  std::printf("%s", header.c_str());

  bool ok = true;
  for (const bool two : {false, true}) ok = bench_while(iterations, two, while_reps) && ok;
  ok = bench_hit_launch(launch_reps) && ok;

  std::printf("\nAll times in microseconds (medians). ratio = flowdsl / raw.\n");
  std::printf("%-44s %8s %10s %10s %7s %8s\n", "figure", "N", "raw", "flowdsl", "ratio", "goal");
  for (const int width : {1, 2}) {
    const double raw = find("while iteration gpu", "raw", iterations, width);
    const double flow = find("while iteration gpu", "flowdsl", iterations, width);
    std::printf("%-44s %8d %10.3f %10.3f %7.3f %8s\n",
                width == 1 ? "WHILE iteration, GPU (body: 1 kernel)" : "WHILE iteration, GPU (body: kernel + decide)",
                iterations, raw, flow, flow / raw, "<= 1.05");
  }
  const double raw_hit = find("hit launch host", "raw", 4, 0), flow_hit = find("hit launch host", "flowdsl", 4, 0);
  std::printf("%-44s %8d %10.3f %10.3f %7.3f %8s\n", "hit launch, host (kernel, child, IF)", 4, raw_hit, flow_hit,
              flow_hit / raw_hit, "<= 1.10");
  if (!json_path.empty()) bench::write_json(json_path, header, figures);
  std::printf("\nresults %s\n", ok ? "verified: every variant computed the expected values" : "WRONG: see errors above");
  return ok ? 0 : 1;
}
