// SPDX-License-Identifier: Apache-2.0
// What the native graph calls cost on this machine, per node: the runtime's
// cudaGraphAddKernelNode against the driver's cuGraphAddKernelNode given the function's driver
// handle (what flowdsl's emitter calls), each followed by the same instantiation and first launch
// (the host time of the cudaGraphLaunch call); then the host time of hit launches of each kind of
// executable (nodes added by the runtime, by the driver given the function's CUfunction or its
// context-independent CUkernel, instantiated for device launch) beside flowdsl's own executable
// of the same chain launched directly and through Runtime::launch; and the two
// per-node update calls. Chains of tiny kernels, N = 100, 1000 and 10000 nodes, widths 1 and 8.
// Every variant's graph is launched once and its result checked. Run by hand (no ctest);
// `--quick` runs N = 100 only.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <array>
#include <cstdio>
#include <vector>

#include "bench_cuda.hpp"
#include "bench_util.hpp"
#include "flowdsl/flowdsl.hpp"

namespace {

constexpr int threads = 32;

__global__ void tiny(float* slot, float value) { slot[threadIdx.x] += value; }

template <class Pfn>
Pfn driver_call(const char* name) {
  void* found = nullptr;
  cudaDriverEntryPointQueryResult status{};
  CHECK_CUDA(cudaGetDriverEntryPointByVersion(name, &found, 12000, cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "the driver has no %s\n", name);
    std::exit(1);
  }
  return reinterpret_cast<Pfn>(found);
}

struct Calls {
  PFN_cuGraphAddKernelNode_v12000 add = driver_call<PFN_cuGraphAddKernelNode_v12000>("cuGraphAddKernelNode");
  PFN_cuGraphExecKernelNodeSetParams_v12000 set =
      driver_call<PFN_cuGraphExecKernelNodeSetParams_v12000>("cuGraphExecKernelNodeSetParams");
  cudaFunction_t function = nullptr;
  cudaKernel_t kernel = nullptr;
};

// How a chain's nodes are added.
enum class Adder { runtime, driver_function, driver_kernel };

// One chain graph's arguments: node i adds values[i] to slot (i % width).
struct Chain {
  Chain(int n, int width, float* slots) : width(width), nodes(n), pointers(n), values(n, 1.0f), args(n) {
    for (int i = 0; i < n; ++i) {
      pointers[i] = slots + (i % width) * threads;
      args[i] = {&pointers[i], &values[i]};
    }
  }
  cudaKernelNodeParams runtime_params(int i) {
    cudaKernelNodeParams p{};
    p.func = reinterpret_cast<void*>(tiny);
    p.gridDim = dim3(1);
    p.blockDim = dim3(threads);
    p.kernelParams = args[i].data();
    return p;
  }
  // With a CUfunction, or (function null) the context-independent CUkernel.
  CUDA_KERNEL_NODE_PARAMS driver_params(int i, cudaFunction_t function, cudaKernel_t kernel = nullptr) {
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = function;
    p.kern = function == nullptr ? reinterpret_cast<CUkernel>(kernel) : nullptr;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = threads;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args[i].data();
    return p;
  }
  // Builds the graph with the runtime's calls (driver == false) or the driver's.
  cudaGraph_t build(bool driver, const Calls& calls) { return build(driver ? Adder::driver_function : Adder::runtime, calls); }
  cudaGraph_t build(Adder adder, const Calls& calls) {
    cudaGraph_t graph = nullptr;
    CHECK_CUDA(cudaGraphCreate(&graph, 0));
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
      const cudaGraphNode_t* dep = i >= width ? &nodes[i - width] : nullptr;
      if (adder != Adder::runtime) {
        const CUDA_KERNEL_NODE_PARAMS p = adder == Adder::driver_function ? driver_params(i, calls.function)
                                                                          : driver_params(i, nullptr, calls.kernel);
        CHECK_CU(calls.add(reinterpret_cast<CUgraphNode*>(&nodes[i]), graph, dep, dep ? 1 : 0, &p));
      } else {
        const cudaKernelNodeParams p = runtime_params(i);
        CHECK_CUDA(cudaGraphAddKernelNode(&nodes[i], graph, dep, dep ? 1 : 0, &p));
      }
    }
    return graph;
  }
  int width;
  std::vector<cudaGraphNode_t> nodes;
  std::vector<float*> pointers;
  std::vector<float> values;
  std::vector<std::array<void*, 2>> args;
};

// The same chain declared in a flowdsl Graph: node i adds 1 to slot (i % width), after node i - width.
std::vector<flowdsl::KernelNode<float*, float>> declare_chain(flowdsl::Graph& graph, int n, int width, float* slots) {
  std::vector<flowdsl::KernelNode<float*, float>> kernels;
  kernels.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    kernels.push_back(graph.kernel("k" + std::to_string(i), tiny).grid(1).block(threads).args(slots + (i % width) * threads, 1.0f));
    if (i >= width) kernels.back().after(kernels[static_cast<std::size_t>(i - width)]);
  }
  return kernels;
}

// Every slot of chain c holds the number of nodes in it.
bool verify(float* slots, int n, int width, const char* who) {
  std::vector<float> host(static_cast<std::size_t>(width) * threads);
  CHECK_CUDA(cudaMemcpy(host.data(), slots, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int c = 0; c < width; ++c) {
    const int in_chain = n / width + (c < n % width ? 1 : 0);
    for (int t = 0; t < threads; ++t) {
      if (host[static_cast<std::size_t>(c * threads + t)] != static_cast<float>(in_chain)) {
        std::fprintf(stderr, "%s: chain %d holds %g, expected %d\n", who, c, host[static_cast<std::size_t>(c * threads + t)],
                     in_chain);
        return false;
      }
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<bench::Options> options = bench::parse_options(argc, argv);
  if (!options) return 2;
  if (!bench::has_device()) {
    std::printf("native_calls_bench: no CUDA device\n");
    return 0;
  }
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreate(&stream));
  float* slots = nullptr;
  CHECK_CUDA(cudaMalloc(&slots, 8 * threads * sizeof(float)));
  tiny<<<1, threads, 0, stream>>>(slots, 0.0f);  // loads the kernel
  CHECK_CUDA(cudaStreamSynchronize(stream));
  Calls calls;
  CHECK_CUDA(cudaGetFuncBySymbol(&calls.function, reinterpret_cast<const void*>(tiny)));
  CHECK_CUDA(cudaGetKernel(&calls.kernel, reinterpret_cast<const void*>(tiny)));

  bool ok = true;
  std::printf("per node, µs (medians); add: adding the nodes; inst: instantiate with upload; launch: the first\n"
              "cudaGraphLaunch call; devl: the runtime's nodes instantiated for device launch\n");
  std::printf("%6s %5s %12s %12s %12s %12s %12s %14s %14s %14s %18s %18s\n", "N", "width", "runtime add", "driver add",
              "runtime inst", "driver inst", "devl inst", "runtime launch", "driver launch", "devl launch",
              "driver/runtime total", "devl/runtime total");
  const std::vector<int> sizes = options->quick ? std::vector<int>{100} : std::vector<int>{100, 1000, 2000, 10000};
  for (int n : sizes) {
    for (int width : {1, 8}) {
      std::vector<double> add[3], inst[3], launch[3];  // runtime, driver, runtime for device launch
      const int reps = n >= 10000 ? 5 : 15;
      for (int rep = 0; rep < reps + 1; ++rep) {
        for (int turn = 0; turn < 3; ++turn) {
          const int variant = (turn + rep) % 3;  // rotate which goes first
          const bool driver = variant == 1;
          CHECK_CUDA(cudaMemset(slots, 0, 8 * threads * sizeof(float)));
          Chain chain(n, width, slots);
          CHECK_CUDA(cudaStreamSynchronize(stream));
          const double t0 = bench::now_us();
          cudaGraph_t graph = chain.build(driver, calls);
          const double t1 = bench::now_us();
          flowdsl::NativeExecutable exec =
              bench::instantiate_uploaded(graph, stream, variant == 2 ? cudaGraphInstantiateFlagDeviceLaunch : 0);
          const double t2 = bench::now_us();
          CHECK_CUDA(cudaGraphLaunch(exec.get(), stream));
          const double t3 = bench::now_us();
          CHECK_CUDA(cudaStreamSynchronize(stream));
          ok = ok && verify(slots, n, width, variant == 0 ? "runtime" : variant == 1 ? "driver" : "device launch");
          CHECK_CUDA(cudaGraphDestroy(graph));
          if (rep > 0) {
            add[variant].push_back((t1 - t0) / n);
            inst[variant].push_back((t2 - t1) / n);
            launch[variant].push_back((t3 - t2) / n);
          }
        }
      }
      double total[3];
      for (int v = 0; v < 3; ++v) total[v] = bench::median(add[v]) + bench::median(inst[v]) + bench::median(launch[v]);
      std::printf("%6d %5d %12.3f %12.3f %12.3f %12.3f %12.3f %14.3f %14.3f %14.3f %18.3f %18.3f\n", n, width,
                  bench::median(add[0]), bench::median(add[1]), bench::median(inst[0]), bench::median(inst[1]),
                  bench::median(inst[2]), bench::median(launch[0]), bench::median(launch[1]), bench::median(launch[2]),
                  total[1] / total[0], total[2] / total[0]);
    }
  }

  // Hit launches: the host time of cudaGraphLaunch of an executable kept, its nodes added by the
  // runtime's call, the driver's given the CUfunction (the emitter's) or the CUkernel; of the
  // runtime-added graph instantiated for device launch (launched from the host here); of
  // flowdsl's own executable of the same chain launched by cudaGraphLaunch directly, and of
  // flowdsl's Runtime::launch of it: the last two split Runtime::launch's cost into what its
  // executable costs to launch and what the runtime adds. All six take turns, the stream
  // drained before each call.
  std::printf("\nhit launch, host µs per call (median of 201, taking turns); ratios to runtime nodes\n");
  std::printf("%6s %5s %9s %9s %9s %9s %9s %9s %7s %7s %7s %7s %7s %8s\n", "N", "width", "runtime", "CUfunc",
              "CUkernel", "devlaunch", "fl exec", "flowdsl", "CUfunc", "CUkern", "devl", "exec", "flowdsl",
              "rt-exec");
  for (int n : sizes) {
    for (int width : {1, 8}) {
      Chain chains[4] = {Chain(n, width, slots), Chain(n, width, slots), Chain(n, width, slots), Chain(n, width, slots)};
      const Adder adders[4] = {Adder::runtime, Adder::driver_function, Adder::driver_kernel, Adder::runtime};
      cudaGraph_t graphs[4];
      flowdsl::NativeExecutable execs[4];
      for (int k = 0; k < 4; ++k) {
        graphs[k] = chains[k].build(adders[k], calls);
        execs[k] = bench::instantiate_uploaded(graphs[k], stream, k < 3 ? 0 : cudaGraphInstantiateFlagDeviceLaunch);
      }
      flowdsl::Graph graph;
      declare_chain(graph, n, width, slots);
      flowdsl::Runtime runtime;
      CHECK_CUDA(cudaMemset(slots, 0, 8 * threads * sizeof(float)));
      runtime.launch(graph, stream);
      CHECK_CUDA(cudaStreamSynchronize(stream));
      ok = ok && verify(slots, n, width, "flowdsl");
      cudaGraphExec_t own = nullptr;
      runtime.inspect_executable(graph, [&](const flowdsl::Executable& e) { own = e.native_executable(); });
      if (own == nullptr) {
        std::fprintf(stderr, "flowdsl's executable has no native handle\n");
        return 1;
      }
      CHECK_CUDA(cudaMemset(slots, 0, 8 * threads * sizeof(float)));
      CHECK_CUDA(cudaGraphLaunch(execs[3].get(), stream));
      CHECK_CUDA(cudaStreamSynchronize(stream));
      ok = ok && verify(slots, n, width, "device-launch executable");
      std::vector<double> times[6];
      for (int rep = 0; rep < 211; ++rep) {
        for (int k = 0; k < 6; ++k) {
          CHECK_CUDA(cudaStreamSynchronize(stream));
          const double t0 = bench::now_us();
          if (k < 4) {
            CHECK_CUDA(cudaGraphLaunch(execs[k].get(), stream));
          } else if (k == 4) {
            CHECK_CUDA(cudaGraphLaunch(own, stream));
          } else {
            runtime.launch(graph, stream);
          }
          if (rep >= 10) times[k].push_back(bench::now_us() - t0);
        }
      }
      CHECK_CUDA(cudaStreamSynchronize(stream));
      for (cudaGraph_t g : graphs) CHECK_CUDA(cudaGraphDestroy(g));
      double median[6];
      for (int k = 0; k < 6; ++k) median[k] = bench::median(times[k]);
      std::printf("%6d %5d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %7.3f %7.3f %7.3f %7.3f %7.3f %8.2f\n", n, width,
                  median[0], median[1], median[2], median[3], median[4], median[5], median[1] / median[0],
                  median[2] / median[0], median[3] / median[0], median[4] / median[0], median[5] / median[0],
                  median[5] - median[4]);
    }
  }

  // One node changed, then a launch: the host time of both, for an ordinary executable, one made
  // for device launch, and flowdsl's Runtime::launch after the node's argument changed, taking
  // turns (the first node's value alternates between 2 and 1; it ends at 1 and is verified).
  std::printf("\none node updated + launch, host µs per call (median of 201, taking turns), width 1\n");
  std::printf("%6s %12s %12s %12s %12s %12s\n", "N", "ordinary", "devlaunch", "flowdsl", "devl/ord", "flowdsl/ord");
  for (int n : sizes) {
    Chain chains[2] = {Chain(n, 1, slots), Chain(n, 1, slots)};
    cudaGraph_t graphs[2];
    flowdsl::NativeExecutable execs[2];
    for (int k = 0; k < 2; ++k) {
      graphs[k] = chains[k].build(Adder::runtime, calls);
      execs[k] = bench::instantiate_uploaded(graphs[k], stream, k == 0 ? 0 : cudaGraphInstantiateFlagDeviceLaunch);
    }
    flowdsl::Graph graph;
    std::vector<flowdsl::KernelNode<float*, float>> kernels = declare_chain(graph, n, 1, slots);
    flowdsl::Runtime runtime;
    runtime.launch(graph, stream);
    std::vector<double> times[3];
    for (int rep = 0; rep < 212; ++rep) {
      const float value = rep % 2 == 0 ? 2.0f : 1.0f;
      for (int k = 0; k < 3; ++k) {
        CHECK_CUDA(cudaStreamSynchronize(stream));
        const double t0 = bench::now_us();
        if (k < 2) {
          chains[k].values[0] = value;
          const cudaKernelNodeParams p = chains[k].runtime_params(0);
          CHECK_CUDA(cudaGraphExecKernelNodeSetParams(execs[k].get(), chains[k].nodes[0], &p));
          CHECK_CUDA(cudaGraphLaunch(execs[k].get(), stream));
        } else {
          kernels[0].arg<1>(value);
          runtime.launch(graph, stream);
        }
        if (rep >= 11) times[k].push_back(bench::now_us() - t0);
      }
    }
    const char* who[3] = {"ordinary executable, updated", "device-launch executable, updated", "flowdsl, updated"};
    for (int k = 0; k < 3; ++k) {
      CHECK_CUDA(cudaStreamSynchronize(stream));
      CHECK_CUDA(cudaMemset(slots, 0, 8 * threads * sizeof(float)));
      if (k < 2) {
        CHECK_CUDA(cudaGraphLaunch(execs[k].get(), stream));
      } else {
        runtime.launch(graph, stream);
      }
      CHECK_CUDA(cudaStreamSynchronize(stream));
      ok = ok && verify(slots, n, 1, who[k]);
    }
    for (cudaGraph_t g : graphs) CHECK_CUDA(cudaGraphDestroy(g));
    const double m[3] = {bench::median(times[0]), bench::median(times[1]), bench::median(times[2])};
    std::printf("%6d %12.2f %12.2f %12.2f %12.3f %12.3f\n", n, m[0], m[1], m[2], m[1] / m[0], m[2] / m[0]);
  }

  // Updates: 100 nodes of a 1000-node chain given a new value, by each call, alternately.
  {
    const int n = 1000;
    Chain chain(n, 1, slots);
    cudaGraph_t graph = chain.build(false, calls);
    flowdsl::NativeExecutable exec = bench::instantiate_uploaded(graph, stream);
    std::vector<double> times[2];
    for (int rep = 0; rep < 31; ++rep) {
      for (int driver = 0; driver < 2; ++driver) {
        const double t0 = bench::now_us();
        for (int i = 0; i < n; i += 10) {
          chain.values[i] = static_cast<float>(rep + 2);
          if (driver) {
            const CUDA_KERNEL_NODE_PARAMS p = chain.driver_params(i, calls.function);
            CHECK_CU(calls.set(reinterpret_cast<CUgraphExec>(exec.get()), chain.nodes[i], &p));
          } else {
            const cudaKernelNodeParams p = chain.runtime_params(i);
            CHECK_CUDA(cudaGraphExecKernelNodeSetParams(exec.get(), chain.nodes[i], &p));
          }
        }
        times[driver].push_back((bench::now_us() - t0) / (n / 10));
      }
    }
    // The last values applied: every 10th node adds 32 (rep 30 + 2), the others 1.
    CHECK_CUDA(cudaMemset(slots, 0, threads * sizeof(float)));
    CHECK_CUDA(cudaGraphLaunch(exec.get(), stream));
    std::vector<float> host(threads);
    CHECK_CUDA(cudaMemcpy(host.data(), slots, threads * sizeof(float), cudaMemcpyDeviceToHost));
    const float want = static_cast<float>(n - n / 10 + (n / 10) * 32);
    for (float v : host) ok = ok && v == want;
    if (host[0] != want) std::fprintf(stderr, "updates: slot holds %g, expected %g\n", host[0], want);
    std::printf("kernel node update, µs per call (medians): runtime %.3f, driver %.3f\n", bench::median(times[0]),
                bench::median(times[1]));
    CHECK_CUDA(cudaGraphDestroy(graph));
  }
  CHECK_CUDA(cudaFree(slots));
  CHECK_CUDA(cudaStreamDestroy(stream));
  std::printf("%s\n", ok ? "results verified" : "RESULTS WRONG");
  return ok ? 0 : 1;
}
