// SPDX-License-Identifier: Apache-2.0
// flowdsl side by side with stream launches, stream capture and hand-written CUDA graph code,
// in one process and one run: build, instantiate, cache-hit launch, replay and update costs
// for chains (width 1) and fan-outs (width 8) of N tiny kernels; a chain rebuilt from scratch
// with 10% new arguments (raw: new cudaGraph + cudaGraphExecUpdate); 8 threads launching one
// topology on their own streams (raw: an executable per stream, and one shared); last, hit
// launches under the profiler and after it (N <= 1000).
//
//   flowdsl_bench [--quick] [--json FILE]
//
// Host figures come from the host clock (medians), GPU figures from CUDA events (medians).
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_cuda.hpp"
#include "bench_util.hpp"
#include "flowdsl/flowdsl.hpp"


namespace {

// One block of 32 threads, each updating one float: the reference workload of
// shared/reference/h200-anchors.md.
__global__ void tiny(float* p, float v) { p[threadIdx.x] += v; }

constexpr int threads = 32;

struct Shape {
  int n;      // kernels in all
  int width;  // independent chains; node i belongs to chain i % width and follows node i - width
};

struct Settings {
  int build_reps;
  int launch_reps;
  int replay_reps;
  int update_reps;
};

std::vector<bench::Figure> figures;

void record(const char* figure, const char* variant, const Shape& s, double us, int k = 0) {
  figures.push_back(bench::Figure{figure, variant, s.n, s.width, k, us});
}

/// Per-chain buffers of 32 floats, and streams and events to fork and join the chains.
struct Resources {
  explicit Resources(int width) : buffers(static_cast<std::size_t>(width)) {
    for (auto& b : buffers) CHECK_CUDA(cudaMalloc(&b, threads * sizeof(float)));
    streams.push_back(flowdsl::make_stream());
    for (int i = 1; i < width; ++i) streams.push_back(flowdsl::make_stream());
    for (int i = 0; i <= width; ++i) events.push_back(flowdsl::make_event(cudaEventDisableTiming));
    start = flowdsl::make_event();
    stop = flowdsl::make_event();
  }
  ~Resources() {
    for (auto* b : buffers) cudaFree(b);
  }
  cudaStream_t main() const { return streams[0].get(); }
  void zero() {
    for (auto* b : buffers) CHECK_CUDA(cudaMemset(b, 0, threads * sizeof(float)));
    CHECK_CUDA(cudaDeviceSynchronize());
  }

  std::vector<float*> buffers;
  std::vector<flowdsl::StreamHandle> streams;
  std::vector<flowdsl::EventHandle> events;
  flowdsl::EventHandle start, stop;
};

/// The work launched kernel by kernel: chains on their own streams, forked from and joined
/// back into the main stream (also what stream capture records).
void launch_on_streams(const Shape& s, Resources& r) {
  const int w = s.width;
  if (w > 1) {
    CHECK_CUDA(cudaEventRecord(r.events[0].get(), r.main()));
    for (int c = 1; c < w; ++c)
      CHECK_CUDA(cudaStreamWaitEvent(r.streams[static_cast<std::size_t>(c)].get(), r.events[0].get()));
  }
  for (int i = 0; i < s.n; ++i) {
    const int c = i % w;
    tiny<<<1, threads, 0, r.streams[static_cast<std::size_t>(c)].get()>>>(r.buffers[static_cast<std::size_t>(c)], 1.0f);
  }
  CHECK_CUDA(cudaGetLastError());
  if (w > 1) {
    for (int c = 1; c < w; ++c) {
      CHECK_CUDA(
          cudaEventRecord(r.events[static_cast<std::size_t>(c)].get(), r.streams[static_cast<std::size_t>(c)].get()));
      CHECK_CUDA(cudaStreamWaitEvent(r.main(), r.events[static_cast<std::size_t>(c)].get()));
    }
  }
}

/// The same graph written by hand against the CUDA graph API.
struct RawGraph {
  RawGraph(const Shape& s, Resources& r)
      : nodes(static_cast<std::size_t>(s.n)),
        params(nodes.size()),
        values(nodes.size(), 1.0f),
        pointers(nodes.size()),
        args(nodes.size()) {
    CHECK_CUDA(cudaGraphCreate(&graph, 0));
    for (int i = 0; i < s.n; ++i) {
      const auto u = static_cast<std::size_t>(i);
      pointers[u] = r.buffers[static_cast<std::size_t>(i % s.width)];
      args[u] = {&pointers[u], &values[u]};
      cudaKernelNodeParams& p = params[u];
      p = {};
      p.func = reinterpret_cast<void*>(tiny);
      p.gridDim = dim3(1);
      p.blockDim = dim3(threads);
      p.kernelParams = args[u].data();
      const cudaGraphNode_t* dep = i >= s.width ? &nodes[u - static_cast<std::size_t>(s.width)] : nullptr;
      CHECK_CUDA(cudaGraphAddKernelNode(&nodes[u], graph, dep, dep ? 1 : 0, &p));
    }
  }
  void instantiate(cudaStream_t stream) {
    cudaGraphInstantiateParams ip{};
    ip.flags = cudaGraphInstantiateFlagUpload;
    ip.uploadStream = stream;
    CHECK_CUDA(cudaGraphInstantiateWithParams(&exec, graph, &ip));
  }
  void update(std::size_t i, float v) {
    values[i] = v;
    CHECK_CUDA(cudaGraphExecKernelNodeSetParams(exec, nodes[i], &params[i]));
  }
  ~RawGraph() {
    if (exec) cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<cudaGraphNode_t> nodes;
  std::vector<cudaKernelNodeParams> params;
  std::vector<float> values;
  std::vector<float*> pointers;
  std::vector<std::array<void*, 2>> args;
};

/// The same graph through flowdsl's builder.
struct FlowGraph {
  FlowGraph(const Shape& s, Resources& r) {
    nodes.reserve(static_cast<std::size_t>(s.n));
    for (int i = 0; i < s.n; ++i) {
      nodes.push_back(graph.kernel("k" + std::to_string(i), tiny).grid(1)
                          .block(threads)
                          .args(r.buffers[static_cast<std::size_t>(i % s.width)], 1.0f));
      if (i >= s.width) nodes.back().after(nodes[static_cast<std::size_t>(i - s.width)]);
    }
  }
  flowdsl::Graph graph;
  std::vector<flowdsl::KernelNode<float*, float>> nodes;
};

/// Host time of `launch` alone (the stream is drained before each sample).
template <class F>
double host_launch_us(int reps, cudaStream_t stream, F&& launch) {
  std::vector<double> t;
  for (int i = 0; i < reps + 3; ++i) {
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const double t0 = bench::now_us();
    launch();
    const double t1 = bench::now_us();
    if (i >= 3) t.push_back(t1 - t0);
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  return bench::median(t);
}

/// Host times of `a` and `b`, sampled alternately so that drift (clocks, other load) falls on
/// both alike; the stream is drained before each sample.
template <class A, class B>
std::pair<double, double> host_pair_us(int reps, cudaStream_t stream, A&& a, B&& b) {
  std::vector<double> ta, tb;
  for (int i = 0; i < reps + 3; ++i) {
    for (int which = 0; which < 2; ++which) {
      CHECK_CUDA(cudaStreamSynchronize(stream));
      const double t0 = bench::now_us();
      if (which == 0)
        a();
      else
        b();
      const double t1 = bench::now_us();
      if (i >= 3) (which == 0 ? ta : tb).push_back(t1 - t0);
    }
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  return {bench::median(ta), bench::median(tb)};
}

/// GPU time between events around `launch` on the main stream.
template <class F>
double gpu_us(int reps, Resources& r, F&& launch) {
  std::vector<double> t;
  for (int i = 0; i < reps + 2; ++i) {
    CHECK_CUDA(cudaEventRecord(r.start.get(), r.main()));
    launch();
    CHECK_CUDA(cudaEventRecord(r.stop.get(), r.main()));
    CHECK_CUDA(cudaEventSynchronize(r.stop.get()));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, r.start.get(), r.stop.get()));
    if (i >= 2) t.push_back(1000.0 * ms);
  }
  return bench::median(t);
}

/// Every slot of chain c must hold (nodes in chain c) * launches after `launches` launches.
bool verify(const Shape& s, Resources& r, int launches, const char* who) {
  for (int c = 0; c < s.width; ++c) {
    float host[threads];
    CHECK_CUDA(cudaMemcpy(host, r.buffers[static_cast<std::size_t>(c)], sizeof host, cudaMemcpyDeviceToHost));
    const int in_chain = s.n / s.width + (c < s.n % s.width ? 1 : 0);
    for (float v : host) {
      if (v != static_cast<float>(in_chain * launches)) {
        std::fprintf(stderr, "%s: chain %d holds %g, expected %d\n", who, c, v, in_chain * launches);
        return false;
      }
    }
  }
  return true;
}

bool run_shape(const Shape& s, const Settings& set) {
  Resources r(s.width);
  bool ok = true;

  // Build (+ validate + lower) and instantiate, then the first launch to completion.
  {
    std::vector<double> raw_build, raw_inst, raw_first, flow_build, flow_lower, flow_inst, flow_first, cap_build,
        cap_inst, cap_first;
    // Each variant's graph is destroyed before the next variant starts, so none instantiates
    // beside another's executable.
    flowdsl::Runtime build_runtime;
    const std::unique_ptr<flowdsl::Backend> backend = flowdsl::make_cuda_backend();
    std::vector<double> backend_inst, raw_adds_inst, backend_launch, raw_launch, runtime_miss;
    for (int rep = 0; rep < set.build_reps; ++rep) {
      // Raw and flowdsl take turns going first. Each destroys what it made (graph, executable)
      // before the other starts, so each starts with no executable alive and one just destroyed.
      for (int turn = 0; turn < 2; ++turn) {
        double t0 = 0, t1 = 0, t2 = 0, t3 = 0;
        r.zero();
        if ((turn + rep) % 2 == 0) {
          {
            t0 = bench::now_us();
            RawGraph raw(s, r);
            t1 = bench::now_us();
            raw.instantiate(r.main());
            CHECK_CUDA(cudaGraphLaunch(raw.exec, r.main()));
            t2 = bench::now_us();
            CHECK_CUDA(cudaStreamSynchronize(r.main()));
            t3 = bench::now_us();
          }
          raw_build.push_back(t1 - t0);
          raw_inst.push_back(t2 - t1);
          raw_first.push_back(t3 - t2);
          ok = ok && verify(s, r, 1, "raw");
        } else {
          // A runtime that has launched before: device limits and kernel attributes are known.
          {
            t0 = bench::now_us();
            FlowGraph flow(s, r);
            t1 = bench::now_us();
            (void)flow.graph.plan();
            const double t_lower = bench::now_us();
            build_runtime.launch(flow.graph, r.main());
            t2 = bench::now_us();
            CHECK_CUDA(cudaStreamSynchronize(r.main()));
            t3 = bench::now_us();
            flow_build.push_back(t1 - t0);
            flow_lower.push_back(t_lower - t1);
            flow_inst.push_back(t2 - t_lower);
            flow_first.push_back(t3 - t2);
          }
          ok = ok && verify(s, r, 1, "flowdsl");
          build_runtime.clear();  // its executable goes now, as raw's does at the end of its turn
        }
      }

      // The backend alone (emission + instantiation + upload, no cache): where flowdsl's
      // instantiation time goes, against raw's adds + instantiation timed beside it, each then
      // launched once; and, in the same turns, the runtime's miss (a planned graph's first
      // Runtime::launch), so that what the runtime adds to the backend is seen in like
      // conditions. In rotating order, with nothing else alive.
      for (int turn = 0; turn < 3; ++turn) {
        const int which = (turn + rep) % 3;
        if (which == 2) {
          FlowGraph flow(s, r);
          (void)flow.graph.plan();
          CHECK_CUDA(cudaStreamSynchronize(r.main()));
          const double b0 = bench::now_us();
          build_runtime.launch(flow.graph, r.main());
          const double b1 = bench::now_us();
          runtime_miss.push_back(b1 - b0);
          CHECK_CUDA(cudaStreamSynchronize(r.main()));
          build_runtime.clear();
        } else if (which == 0) {
          FlowGraph flow(s, r);
          const flowdsl::Plan& plan = flow.graph.plan();
          CHECK_CUDA(cudaStreamSynchronize(r.main()));
          const double b0 = bench::now_us();
          auto executable = backend->instantiate(flow.graph.description(), plan, r.main());
          const double b1 = bench::now_us();
          executable->launch(r.main());
          const double b2 = bench::now_us();
          backend_inst.push_back(b1 - b0);
          backend_launch.push_back(b2 - b1);
          CHECK_CUDA(cudaStreamSynchronize(r.main()));
        } else {
          CHECK_CUDA(cudaStreamSynchronize(r.main()));
          const double b0 = bench::now_us();
          RawGraph raw(s, r);
          raw.instantiate(r.main());
          const double b1 = bench::now_us();
          CHECK_CUDA(cudaGraphLaunch(raw.exec, r.main()));
          const double b2 = bench::now_us();
          raw_adds_inst.push_back(b1 - b0);
          raw_launch.push_back(b2 - b1);
          CHECK_CUDA(cudaStreamSynchronize(r.main()));
        }
      }

      r.zero();
      const double t0 = bench::now_us();
      cudaGraph_t captured = nullptr;
      CHECK_CUDA(cudaStreamBeginCapture(r.main(), cudaStreamCaptureModeThreadLocal));
      launch_on_streams(s, r);
      CHECK_CUDA(cudaStreamEndCapture(r.main(), &captured));
      const double t1 = bench::now_us();
      cudaGraphExec_t exec = nullptr;
      cudaGraphInstantiateParams ip{};
      ip.flags = cudaGraphInstantiateFlagUpload;
      ip.uploadStream = r.main();
      CHECK_CUDA(cudaGraphInstantiateWithParams(&exec, captured, &ip));
      CHECK_CUDA(cudaGraphLaunch(exec, r.main()));
      const double t2 = bench::now_us();
      CHECK_CUDA(cudaStreamSynchronize(r.main()));
      const double t3 = bench::now_us();
      cap_build.push_back(t1 - t0);
      cap_inst.push_back(t2 - t1);
      cap_first.push_back(t3 - t2);
      ok = ok && verify(s, r, 1, "capture");
      CHECK_CUDA(cudaGraphExecDestroy(exec));
      CHECK_CUDA(cudaGraphDestroy(captured));
    }
    record("build", "raw", s, bench::median(raw_build));
    record("build", "flowdsl", s, bench::median(flow_build));
    record("validate+lower", "flowdsl", s, bench::median(flow_lower));
    record("backend emit+instantiate", "flowdsl", s, bench::median(backend_inst));
    record("backend emit+instantiate", "raw", s, bench::median(raw_adds_inst));
    record("backend first launch", "flowdsl", s, bench::median(backend_launch));
    record("backend first launch", "raw", s, bench::median(raw_launch));
    record("runtime miss beside backend", "flowdsl", s, bench::median(runtime_miss));
    record("build", "capture", s, bench::median(cap_build));
    record("instantiate+launch", "raw", s, bench::median(raw_inst));
    record("instantiate+launch", "flowdsl", s, bench::median(flow_inst));
    record("instantiate+launch", "capture", s, bench::median(cap_inst));
    record("first completion", "raw", s, bench::median(raw_first));
    record("first completion", "flowdsl", s, bench::median(flow_first));
    record("first completion", "capture", s, bench::median(cap_first));
  }

  // Steady state: one executable of each kind, kept.
  RawGraph raw(s, r);
  raw.instantiate(r.main());
  FlowGraph flow(s, r);
  flowdsl::Runtime runtime;
  runtime.launch(flow.graph, r.main());
  cudaGraph_t captured = nullptr;
  CHECK_CUDA(cudaStreamBeginCapture(r.main(), cudaStreamCaptureModeThreadLocal));
  launch_on_streams(s, r);
  CHECK_CUDA(cudaStreamEndCapture(r.main(), &captured));
  cudaGraphExec_t cap_exec = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&cap_exec, captured, 0));
  CHECK_CUDA(cudaStreamSynchronize(r.main()));

  const auto [raw_hit, flow_hit] = host_pair_us(
      set.launch_reps, r.main(), [&] { CHECK_CUDA(cudaGraphLaunch(raw.exec, r.main())); },
      [&] { runtime.launch(flow.graph, r.main()); });
  record("hit launch host", "raw", s, raw_hit);
  record("hit launch host", "flowdsl", s, flow_hit);
  record("hit launch host", "capture", s,
         host_launch_us(set.launch_reps, r.main(), [&] { CHECK_CUDA(cudaGraphLaunch(cap_exec, r.main())); }));
  record("launch all host", "stream", s, host_launch_us(set.launch_reps, r.main(), [&] { launch_on_streams(s, r); }));

  record("replay gpu", "raw", s, gpu_us(set.replay_reps, r, [&] { CHECK_CUDA(cudaGraphLaunch(raw.exec, r.main())); }));
  record("replay gpu", "flowdsl", s, gpu_us(set.replay_reps, r, [&] { runtime.launch(flow.graph, r.main()); }));
  record("replay gpu", "capture", s,
         gpu_us(set.replay_reps, r, [&] { CHECK_CUDA(cudaGraphLaunch(cap_exec, r.main())); }));
  record("replay gpu", "stream", s, gpu_us(set.replay_reps, r, [&] { launch_on_streams(s, r); }));

  // Wall time from the first launch call to the end of the work (host clock, includes the sync).
  auto wall = [&](auto&& launch) {
    return host_launch_us(set.replay_reps, r.main(), [&] {
      launch();
      CHECK_CUDA(cudaStreamSynchronize(r.main()));
    });
  };
  record("replay wall", "raw", s, wall([&] { CHECK_CUDA(cudaGraphLaunch(raw.exec, r.main())); }));
  record("replay wall", "flowdsl", s, wall([&] { runtime.launch(flow.graph, r.main()); }));
  record("replay wall", "capture", s, wall([&] { CHECK_CUDA(cudaGraphLaunch(cap_exec, r.main())); }));
  record("replay wall", "stream", s, wall([&] { launch_on_streams(s, r); }));

  // Update k of N changed nodes, then launch: host time of both together.
  for (int k : {1, 10, s.n}) {
    if (k > s.n || (k == s.n && s.n == 10)) continue;  // k = N = 10 is the k = 10 row
    const std::size_t stride = static_cast<std::size_t>(s.n / k);
    float value = 1.0f;
    const auto [raw_k, flow_k] = host_pair_us(
        set.update_reps, r.main(),
        [&] {
          value = value == 1.0f ? 2.0f : 1.0f;
          for (int j = 0; j < k; ++j) raw.update(static_cast<std::size_t>(j) * stride, value);
          CHECK_CUDA(cudaGraphLaunch(raw.exec, r.main()));
        },
        [&] {
          for (int j = 0; j < k; ++j) flow.nodes[static_cast<std::size_t>(j) * stride].arg<1>(value);
          runtime.launch(flow.graph, r.main());
        });
    record("update k + launch host", "raw", s, raw_k, k);
    record("update k + launch host", "flowdsl", s, flow_k, k);
    // Each pair changes both variants to the same new value, so both always update k nodes.
  }
  const auto stats = runtime.statistics();
  if (stats.misses != 1 || stats.reinstantiations != 0) {
    std::fprintf(stderr, "unexpected cache activity: misses=%llu reinstantiations=%llu\n",
                 static_cast<unsigned long long>(stats.misses),
                 static_cast<unsigned long long>(stats.reinstantiations));
    ok = false;
  }

  // A last check that updated flowdsl launches compute what raw launches compute.
  for (std::size_t i = 0; i < flow.nodes.size(); ++i) flow.nodes[i].arg<1>(1.0f);
  r.zero();
  runtime.launch(flow.graph, r.main());
  CHECK_CUDA(cudaStreamSynchronize(r.main()));
  ok = ok && verify(s, r, 1, "flowdsl after updates");

  CHECK_CUDA(cudaGraphExecDestroy(cap_exec));
  CHECK_CUDA(cudaGraphDestroy(captured));
  return ok;
}

// ---------------------------------------------------------------------------------------------
// Rebuild: a request handler builds the same chain from scratch for every request, 10% of its
// nodes with new arguments. Raw: the nodes added to a new cudaGraph, cudaGraphExecUpdate of the
// executable, launch. flowdsl: a new Graph declared, planned and launched through a Runtime that
// holds the executable (its parameters compared by value: only the differing nodes updated).

/// Node i of the rebuilt chain adds `changed_value` when i % 10 == 0, else 1.
float rebuild_value(int i, float changed_value) { return i % 10 == 0 ? changed_value : 1.0f; }

struct RebuildTimes {
  std::vector<double> raw_add, raw_update_launch, flow_declare, flow_plan, flow_launch;
};

bool run_rebuild(int n, const Settings& set) {
  const Shape s{n, 1};
  Resources r(1);
  float* buffer = r.buffers[0];
  cudaStream_t stream = r.main();

  // The raw executable, instantiated once from a first build.
  auto raw_build = [&](float changed_value, std::vector<float>& values, std::vector<float*>& pointers,
                       std::vector<std::array<void*, 2>>& args) {
    cudaGraph_t graph = nullptr;
    CHECK_CUDA(cudaGraphCreate(&graph, 0));
    values.resize(static_cast<std::size_t>(n));
    pointers.assign(static_cast<std::size_t>(n), buffer);
    args.resize(static_cast<std::size_t>(n));
    cudaGraphNode_t prev = nullptr;
    for (int i = 0; i < n; ++i) {
      const auto u = static_cast<std::size_t>(i);
      values[u] = rebuild_value(i, changed_value);
      args[u] = {&pointers[u], &values[u]};
      cudaKernelNodeParams p{};
      p.func = reinterpret_cast<void*>(tiny);
      p.gridDim = dim3(1);
      p.blockDim = dim3(threads);
      p.kernelParams = args[u].data();
      cudaGraphNode_t node = nullptr;
      CHECK_CUDA(cudaGraphAddKernelNode(&node, graph, prev ? &prev : nullptr, prev ? 1 : 0, &p));
      prev = node;
    }
    return graph;
  };
  std::vector<float> values;
  std::vector<float*> pointers;
  std::vector<std::array<void*, 2>> args;
  cudaGraph_t first = raw_build(1.0f, values, pointers, args);
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&exec, first, 0));
  CHECK_CUDA(cudaGraphDestroy(first));

  flowdsl::Runtime runtime;
  auto flow_build = [&](float changed_value) {
    flowdsl::Graph g;
    flowdsl::NodeHandle prev(nullptr, 0);
    for (int i = 0; i < n; ++i) {
      auto k = g.kernel("k" + std::to_string(i), tiny)
                   .grid(1)
                   .block(threads)
                   .args(buffer, rebuild_value(i, changed_value));
      if (i > 0) k.after(prev);
      prev = k;
    }
    return g;
  };
  {
    const flowdsl::Graph g = flow_build(1.0f);
    runtime.launch(g, stream);
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));

  RebuildTimes t;
  bool ok = true;
  float raw_value = 1.0f, flow_value = 1.0f;  // each rebuild flips the changed nodes between 2 and 3
  const auto [raw_us, flow_us] = host_pair_us(
      set.update_reps, stream,
      [&] {
        raw_value = raw_value == 2.0f ? 3.0f : 2.0f;
        const double t0 = bench::now_us();
        cudaGraph_t graph = raw_build(raw_value, values, pointers, args);
        const double t1 = bench::now_us();
        cudaGraphExecUpdateResultInfo info{};
        CHECK_CUDA(cudaGraphExecUpdate(exec, graph, &info));
        CHECK_CUDA(cudaGraphLaunch(exec, stream));
        const double t2 = bench::now_us();
        CHECK_CUDA(cudaGraphDestroy(graph));  // as flowdsl's Graph, gone with the request
        t.raw_add.push_back(t1 - t0);
        t.raw_update_launch.push_back(t2 - t1);
      },
      [&] {
        flow_value = flow_value == 2.0f ? 3.0f : 2.0f;
        const double t0 = bench::now_us();
        flowdsl::Graph g = flow_build(flow_value);
        const double t1 = bench::now_us();
        (void)g.plan();
        const double t2 = bench::now_us();
        const flowdsl::LaunchReport report = runtime.launch(g, stream);
        const double t3 = bench::now_us();
        t.flow_declare.push_back(t1 - t0);
        t.flow_plan.push_back(t2 - t1);
        t.flow_launch.push_back(t3 - t2);
        if (report.kind != flowdsl::LaunchKind::updated || report.nodes_updated != static_cast<std::size_t>(n / 10)) {
          std::fprintf(stderr, "rebuild: flowdsl launch %s with %zu nodes updated, expected updated with %d\n",
                       flowdsl::to_string(report.kind), report.nodes_updated, n / 10);
          ok = false;
        }
      });
  record("rebuild 10% + launch host", "raw", s, raw_us, n / 10);
  record("rebuild 10% + launch host", "flowdsl", s, flow_us, n / 10);
  record("rebuild: add nodes", "raw", s, bench::median(t.raw_add), n / 10);
  record("rebuild: exec update + launch", "raw", s, bench::median(t.raw_update_launch), n / 10);
  record("rebuild: declare", "flowdsl", s, bench::median(t.flow_declare), n / 10);
  record("rebuild: validate+lower", "flowdsl", s, bench::median(t.flow_plan), n / 10);
  record("rebuild: launch (value diff + updates)", "flowdsl", s, bench::median(t.flow_launch), n / 10);

  const auto stats = runtime.statistics();
  if (stats.misses != 1 || stats.reinstantiations != 0) {
    std::fprintf(stderr, "rebuild: unexpected cache activity: misses=%llu reinstantiations=%llu\n",
                 static_cast<unsigned long long>(stats.misses),
                 static_cast<unsigned long long>(stats.reinstantiations));
    ok = false;
  }

  // Results: one more rebuild of each, from zero, must add 0.9 n + 0.1 n * 2.
  const float want = static_cast<float>(n - n / 10) + 2.0f * static_cast<float>(n / 10);
  for (int variant = 0; variant < 2; ++variant) {
    r.zero();
    if (variant == 0) {
      cudaGraph_t graph = raw_build(2.0f, values, pointers, args);
      cudaGraphExecUpdateResultInfo info{};
      CHECK_CUDA(cudaGraphExecUpdate(exec, graph, &info));
      CHECK_CUDA(cudaGraphLaunch(exec, stream));
      CHECK_CUDA(cudaGraphDestroy(graph));
    } else {
      const flowdsl::Graph g = flow_build(2.0f);
      runtime.launch(g, stream);
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    float host[threads];
    CHECK_CUDA(cudaMemcpy(host, buffer, sizeof host, cudaMemcpyDeviceToHost));
    for (float v : host) {
      if (v != want) {
        std::fprintf(stderr, "rebuild (%s): holds %g, expected %g\n", variant == 0 ? "raw" : "flowdsl", v, want);
        ok = false;
        break;
      }
    }
  }
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  return ok;
}

// ---------------------------------------------------------------------------------------------
// Streams: `lanes` threads, each with its own stream and its own buffer, launch a chain of 10
// tiny kernels `launches` times. Raw: one executable per stream (and, for reference, one shared
// by all). flowdsl: one Runtime, each thread its own Graph of the same topology. Wall time from
// the start signal to every thread's stream drained.

constexpr int stream_lanes = 8;
constexpr int stream_chain = 10;

/// Runs `body(lane)` on `stream_lanes` threads started together; returns the wall time in µs from
/// the start to the last thread's end (each thread drains its own stream before it ends).
template <class Body>
double lanes_wall_us(Body&& body) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int lane = 0; lane < stream_lanes; ++lane) {
    workers.emplace_back([&, lane] {
      ++ready;
      while (!go.load(std::memory_order_acquire)) {
      }
      body(lane);
    });
  }
  while (ready.load() < stream_lanes) {
  }
  const double t0 = bench::now_us();
  go.store(true, std::memory_order_release);
  for (auto& w : workers) w.join();
  return bench::now_us() - t0;
}

bool run_streams(int launches, int reps) {
  const Shape s{stream_chain, stream_lanes};
  const Shape chain{stream_chain, 1};
  // Per lane: a buffer and a stream (its Resources' main stream), the raw chain instantiated for
  // that buffer, and flowdsl's Graph of the same chain; the shared raw executable has its own.
  std::vector<std::unique_ptr<Resources>> lanes;
  std::vector<std::unique_ptr<RawGraph>> raw;
  std::vector<std::unique_ptr<FlowGraph>> flow;
  for (int lane = 0; lane < stream_lanes; ++lane) {
    lanes.push_back(std::make_unique<Resources>(1));
    raw.push_back(std::make_unique<RawGraph>(chain, *lanes.back()));
    raw.back()->instantiate(lanes.back()->main());
    flow.push_back(std::make_unique<FlowGraph>(chain, *lanes.back()));
  }
  Resources shared_buffer(1);
  RawGraph shared(chain, shared_buffer);
  shared.instantiate(shared_buffer.main());
  auto stream_of = [&](int lane) { return lanes[static_cast<std::size_t>(lane)]->main(); };
  auto at = [](int lane) { return static_cast<std::size_t>(lane); };
  flowdsl::Runtime runtime;
  CHECK_CUDA(cudaDeviceSynchronize());

  bool ok = true;
  auto expect = [&](const char* who, float* buffer, float want) {
    float host[threads];
    CHECK_CUDA(cudaMemcpy(host, buffer, sizeof host, cudaMemcpyDeviceToHost));
    for (float v : host) {
      if (v != want) {
        std::fprintf(stderr, "streams (%s): holds %g, expected %g\n", who, v, want);
        ok = false;
        return;
      }
    }
  };
  auto zero_all = [&] {
    for (auto& lane : lanes) lane->zero();
    shared_buffer.zero();
  };

  // Warm-up: flowdsl's pool fills (an executable per stream), every raw executable runs once.
  // A lane whose launches happen to find another lane's executable idle takes it instead of
  // making its own, so one round may leave fewer executables than lanes: the timed runs would
  // then pay the missing instantiations. Rounds go on until each lane has one (at most 20).
  for (int round = 0; round < 20 && (round == 0 || runtime.size() < static_cast<std::size_t>(stream_lanes));
       ++round) {
    (void)lanes_wall_us([&](int lane) {
      for (int i = 0; i < 20; ++i) runtime.launch(flow[at(lane)]->graph, stream_of(lane));
      CHECK_CUDA(cudaGraphLaunch(raw[at(lane)]->exec, stream_of(lane)));
      CHECK_CUDA(cudaGraphLaunch(shared.exec, stream_of(lane)));
      CHECK_CUDA(cudaStreamSynchronize(stream_of(lane)));
    });
  }
  const flowdsl::RuntimeStatistics warm = runtime.statistics();

  std::vector<double> raw_t, shared_t, flow_t;
  const float want = static_cast<float>(stream_chain * launches);
  for (int rep = 0; rep < reps; ++rep) {
    zero_all();
    raw_t.push_back(lanes_wall_us([&](int lane) {
      for (int i = 0; i < launches; ++i) CHECK_CUDA(cudaGraphLaunch(raw[at(lane)]->exec, stream_of(lane)));
      CHECK_CUDA(cudaStreamSynchronize(stream_of(lane)));
    }));
    for (int lane = 0; lane < stream_lanes; ++lane) expect("raw", lanes[at(lane)]->buffers[0], want);

    shared_t.push_back(lanes_wall_us([&](int lane) {
      for (int i = 0; i < launches; ++i) CHECK_CUDA(cudaGraphLaunch(shared.exec, stream_of(lane)));
      CHECK_CUDA(cudaStreamSynchronize(stream_of(lane)));
    }));
    expect("raw shared", shared_buffer.buffers[0], want * stream_lanes);

    zero_all();
    flow_t.push_back(lanes_wall_us([&](int lane) {
      for (int i = 0; i < launches; ++i) runtime.launch(flow[at(lane)]->graph, stream_of(lane));
      CHECK_CUDA(cudaStreamSynchronize(stream_of(lane)));
    }));
    for (int lane = 0; lane < stream_lanes; ++lane) expect("flowdsl", lanes[at(lane)]->buffers[0], want);
  }
  record("streams: 8 lanes, wall", "raw", s, bench::median(raw_t), launches);
  record("streams: 8 lanes, wall", "raw shared", s, bench::median(shared_t), launches);
  record("streams: 8 lanes, wall", "flowdsl", s, bench::median(flow_t), launches);

  const flowdsl::RuntimeStatistics end = runtime.statistics();
  std::printf("streams: flowdsl holds %zu executables (%llu misses, %llu of them beside busy ones); in the timed "
              "runs %llu misses, %llu node updates, %llu launches behind a busy executable\n",
              runtime.size(), static_cast<unsigned long long>(end.misses),
              static_cast<unsigned long long>(end.busy_misses),
              static_cast<unsigned long long>(end.misses - warm.misses),
              static_cast<unsigned long long>(end.node_updates - warm.node_updates),
              static_cast<unsigned long long>(end.busy_launches - warm.busy_launches));
  const std::uint64_t timed = static_cast<std::uint64_t>(reps) * stream_lanes * launches;
  if (end.reinstantiations != 0 || end.launches != warm.launches + timed) {
    std::fprintf(stderr, "streams: flowdsl re-instantiated or lost launches\n");
    ok = false;
  }
  return ok;
}

/// Hit-launch host time around profiling, after every other figure (so that those are taken
/// before CUPTI was ever loaded): through Profiler::launch while a profiler records, and through
/// Runtime::launch (paired with raw) once the profiler is gone, CUPTI still loaded but nothing
/// enabled. Runtime::launch has no profiling hook: "flowdsl" above is the figure with the
/// profiler compiled in and not used. Returns false when CUPTI cannot be used.
bool run_profiler_shape(const Shape& s, const Settings& set) {
  Resources r(s.width);
  RawGraph raw(s, r);
  raw.instantiate(r.main());
  FlowGraph flow(s, r);
  flowdsl::Runtime runtime;
  {
    std::unique_ptr<flowdsl::Profiler> profiler;
    try {
      profiler = std::make_unique<flowdsl::Profiler>(runtime);
    } catch (const flowdsl::ProfilerError& e) {
      std::fprintf(stderr, "profiler rows left out: %s\n", e.what());
      return false;
    }
    profiler->launch(flow.graph, r.main());  // instantiated while CUPTI watches
    record("hit launch host", "profiled", s,
           host_launch_us(set.launch_reps, r.main(), [&] { profiler->launch(flow.graph, r.main()); }));
    const flowdsl::Profile& profile = profiler->collect();  // hands CUPTI's buffers back
    if (profile.dropped_records != 0) {
      std::fprintf(stderr, "CUPTI dropped %llu records\n", static_cast<unsigned long long>(profile.dropped_records));
    }
  }
  runtime.launch(flow.graph, r.main());  // the executable made under the profiler: a hit
  const auto [raw_hit, flow_hit] = host_pair_us(
      set.launch_reps, r.main(), [&] { CHECK_CUDA(cudaGraphLaunch(raw.exec, r.main())); },
      [&] { runtime.launch(flow.graph, r.main()); });
  record("hit launch host", "raw, profiler gone", s, raw_hit);
  record("hit launch host", "flowdsl, profiler gone", s, flow_hit);
  return true;
}

double find(const char* figure, const char* variant, const Shape& s, int k = 0) {
  for (const auto& f : figures) {
    if (f.figure == figure && f.variant == variant && f.n == s.n && f.width == s.width && f.k == k) return f.us;
  }
  return 0.0;
}

void print_table(const std::vector<Shape>& shapes) {
  std::printf("\nAll times in microseconds (medians). ratio = flowdsl / raw.\n");
  std::printf("%-28s %6s %3s %5s %11s %11s %11s %11s %7s\n", "figure", "N", "w", "k", "stream", "capture", "raw",
              "flowdsl", "ratio");
  auto row = [](const char* label, const Shape& s, int k, double stream, double capture, double raw, double flow) {
    auto cell = [](double v) {
      static char buf[4][32];
      static int i = 0;
      char* b = buf[i++ % 4];
      if (v > 0)
        std::snprintf(b, 32, "%11.2f", v);
      else
        std::snprintf(b, 32, "%11s", "-");
      return b;
    };
    std::printf("%-28s %6d %3d %5d %s %s %s %s %7.3f\n", label, s.n, s.width, k, cell(stream), cell(capture), cell(raw),
                cell(flow), raw > 0 ? flow / raw : 0.0);
  };
  for (const Shape& s : shapes) {
    const double raw_total = find("build", "raw", s) + find("instantiate+launch", "raw", s);
    const double flow_total =
        find("build", "flowdsl", s) + find("validate+lower", "flowdsl", s) + find("instantiate+launch", "flowdsl", s);
    const double cap_total = find("build", "capture", s) + find("instantiate+launch", "capture", s);
    row("build+lower+instantiate", s, 0, 0, cap_total, raw_total, flow_total);
    row("  of which build (+lower)", s, 0, 0, find("build", "capture", s), find("build", "raw", s),
        find("build", "flowdsl", s) + find("validate+lower", "flowdsl", s));
    row("  backend alone (emit+instantiate)", s, 0, 0, 0, find("backend emit+instantiate", "raw", s),
        find("backend emit+instantiate", "flowdsl", s));
    row("  backend's first launch call", s, 0, 0, 0, find("backend first launch", "raw", s),
        find("backend first launch", "flowdsl", s));
    row("  runtime miss / backend+launch", s, 0, 0, 0,
        find("backend emit+instantiate", "flowdsl", s) + find("backend first launch", "flowdsl", s),
        find("runtime miss beside backend", "flowdsl", s));
    row("hit launch, host", s, 0, find("launch all host", "stream", s), find("hit launch host", "capture", s),
        find("hit launch host", "raw", s), find("hit launch host", "flowdsl", s));
    if (find("hit launch host", "flowdsl, profiler gone", s) > 0) {
      row("  after a Profiler, host", s, 0, 0, 0, find("hit launch host", "raw, profiler gone", s),
          find("hit launch host", "flowdsl, profiler gone", s));
      row("  profiled (Profiler::launch)", s, 0, 0, 0, find("hit launch host", "raw", s),
          find("hit launch host", "profiled", s));
    }
    row("replay, gpu per node", s, 0, find("replay gpu", "stream", s) / s.n, find("replay gpu", "capture", s) / s.n,
        find("replay gpu", "raw", s) / s.n, find("replay gpu", "flowdsl", s) / s.n);
    row("replay incl. sync, wall", s, 0, find("replay wall", "stream", s), find("replay wall", "capture", s),
        find("replay wall", "raw", s), find("replay wall", "flowdsl", s));
    for (int k : {1, 10, s.n}) {
      const double raw_k = find("update k + launch host", "raw", s, k);
      if (raw_k > 0) row("update k + launch, host", s, k, 0, 0, raw_k, find("update k + launch host", "flowdsl", s, k));
    }
  }
}

void print_rebuild_and_streams(int rebuild_n, int launches) {
  const Shape rebuilt{rebuild_n, 1};
  const int k = rebuild_n / 10;
  const double raw = find("rebuild 10% + launch host", "raw", rebuilt, k);
  const double flow = find("rebuild 10% + launch host", "flowdsl", rebuilt, k);
  std::printf("\nRebuild of a %d-node chain, %d nodes with new arguments, then launch (host µs, medians):\n",
              rebuild_n, k);
  std::printf("  raw: add nodes %.1f + cudaGraphExecUpdate and launch %.1f = %.1f (with the graph's destruction)\n",
              find("rebuild: add nodes", "raw", rebuilt, k), find("rebuild: exec update + launch", "raw", rebuilt, k),
              raw);
  std::printf("  flowdsl: declare %.1f + validate and lower %.1f + launch %.1f = %.1f (with the Graph's destruction)\n",
              find("rebuild: declare", "flowdsl", rebuilt, k), find("rebuild: validate+lower", "flowdsl", rebuilt, k),
              find("rebuild: launch (value diff + updates)", "flowdsl", rebuilt, k), flow);
  std::printf("  ratio flowdsl / raw %.3f (goal <= 0.5)\n", raw > 0 ? flow / raw : 0.0);

  const Shape lanes{stream_chain, stream_lanes};
  const double per_stream = find("streams: 8 lanes, wall", "raw", lanes, launches);
  const double one = find("streams: 8 lanes, wall", "raw shared", lanes, launches);
  const double pool = find("streams: 8 lanes, wall", "flowdsl", lanes, launches);
  std::printf("\n%d threads, each its own stream, launching a chain of %d tiny kernels %d times (wall ms, medians):\n",
              stream_lanes, stream_chain, launches);
  std::printf("  raw, an executable per stream %.2f; raw, one shared executable %.2f; flowdsl, one Runtime %.2f\n",
              per_stream / 1000, one / 1000, pool / 1000);
  std::printf("  throughput flowdsl / raw per stream %.3f (goal >= 0.9)\n", pool > 0 ? per_stream / pool : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<bench::Options> options = bench::parse_options(argc, argv);
  if (!options) return 2;
  const bool quick = options->quick;
  const std::string& json_path = options->json_path;
  if (!bench::has_device()) {
    std::printf("no CUDA device: the GPU benchmark needs one (flowdsl_bench_host runs without)\n");
    return 2;
  }
  const Settings set = quick ? Settings{2, 20, 10, 20} : Settings{5, 200, 50, 100};
  std::vector<Shape> shapes;
  for (int n : quick ? std::vector<int>{10, 100} : std::vector<int>{10, 100, 1000, 10000}) {
    for (int w : {1, 8}) shapes.push_back(Shape{n, w});
  }
  const std::string header = bench::device_header("");
  std::printf("%s", header.c_str());
  bool ok = true;
  for (const Shape& s : shapes) {
    Settings local = set;
    // Builds: the instantiation's spread from one build to the next, and the machine's drift
    // within a shape's builds, are as large as flowdsl's margin over raw; builds of up to 1000
    // nodes take a few milliseconds, so they get three times the samples (10 000 nodes: 7).
    if (s.n >= 10000)
      local = Settings{7, set.launch_reps / 2, set.replay_reps / 2, set.update_reps / 4};
    else
      local.build_reps = 3 * set.build_reps;
    std::fprintf(stderr, "N=%d width=%d ...\n", s.n, s.width);
    ok = run_shape(s, local) && ok;
  }
  const int rebuild_n = quick ? 100 : 1000;
  const int stream_launches = quick ? 20 : 200;
  std::fprintf(stderr, "rebuild N=%d ...\n", rebuild_n);
  ok = run_rebuild(rebuild_n, set) && ok;
  std::fprintf(stderr, "streams %d x %d launches ...\n", stream_lanes, stream_launches);
  ok = run_streams(stream_launches, quick ? 3 : 7) && ok;
  // Last: profiling loads CUPTI, which stays in the process.
  for (const Shape& s : shapes) {
    if (s.n > 1000) continue;  // CUPTI records every kernel of every launch: kept small
    std::fprintf(stderr, "N=%d width=%d, profiler ...\n", s.n, s.width);
    if (!run_profiler_shape(s, set)) break;
  }
  print_table(shapes);
  print_rebuild_and_streams(rebuild_n, stream_launches);
  if (!json_path.empty()) bench::write_json(json_path, header, figures);
  std::printf("\nresults %s\n",
              ok ? "verified: every variant computed the expected values" : "WRONG: see errors above");
  return ok ? 0 : 1;
}
