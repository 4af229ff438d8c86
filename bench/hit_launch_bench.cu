// SPDX-License-Identifier: Apache-2.0
// Hit launches alone: the host time of cudaGraphLaunch of a hand-written chain of N tiny kernels
// ("raw"), of Runtime::launch of the same chain through flowdsl ("flowdsl"), and of
// cudaGraphLaunch of flowdsl's own executable of it ("exec": what the executable costs without
// the runtime), each launch after a synchronisation (as flowdsl_bench's hit launches), in one mode
// per process or taking turns ("both": raw and flowdsl; "all": the three).
// One mode per process is what `perf stat` needs to count what a launch of that kind costs
// (instructions, cache and TLB misses) without the other's; run it with --launches 0 too, to
// take the set-up's counts out. Checks the chain's result at the end.
//
//   hit_launch_bench [--mode raw|flowdsl|exec|both|all] [--n 100] [--launches 20000]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_cuda.hpp"
#include "bench_util.hpp"
#include "flowdsl/flowdsl.hpp"

namespace {

__global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }

constexpr int threads = 32;

struct Raw {
  cudaGraph_t graph = nullptr;
  flowdsl::NativeExecutable exec;
  Raw(int n, float* buffer, cudaStream_t stream) {
    CHECK_CUDA(cudaGraphCreate(&graph, 0));
    cudaGraphNode_t previous = nullptr;
    for (int i = 0; i < n; ++i) {
      void* args[] = {&buffer};
      cudaKernelNodeParams p{};
      p.func = reinterpret_cast<void*>(add_one);
      p.gridDim = dim3(1);
      p.blockDim = dim3(threads);
      p.kernelParams = args;
      cudaGraphNode_t node = nullptr;
      CHECK_CUDA(cudaGraphAddKernelNode(&node, graph, previous ? &previous : nullptr, previous ? 1 : 0, &p));
      previous = node;
    }
    exec = bench::instantiate_uploaded(graph, stream);
  }
  ~Raw() { cudaGraphDestroy(graph); }
};

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "both";
  int n = 100;
  long launches = 20000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
      mode = argv[++i];
    } else if (std::strcmp(argv[i], "--n") == 0 && i + 1 < argc) {
      n = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--launches") == 0 && i + 1 < argc) {
      launches = std::atol(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--mode raw|flowdsl|exec|both|all] [--n 100] [--launches 20000]\n", argv[0]);
      return 2;
    }
  }
  const bool raw_on = mode == "raw" || mode == "both" || mode == "all";
  const bool flow_on = mode == "flowdsl" || mode == "both" || mode == "all";
  const bool exec_on = mode == "exec" || mode == "all";
  if ((!raw_on && !flow_on && !exec_on) || n < 1 || launches < 0) {
    std::fprintf(stderr, "hit_launch_bench: bad --mode, --n or --launches\n");
    return 2;
  }
  if (!bench::has_device()) {
    std::printf("hit_launch_bench: no CUDA device\n");
    return 0;
  }
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* raw_buffer = nullptr;
  float* flow_buffer = nullptr;
  CHECK_CUDA(cudaMalloc(&raw_buffer, threads * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&flow_buffer, threads * sizeof(float)));
  // Setup on the stream the graphs run on: a legacy-stream fill would race them.
  CHECK_CUDA(cudaMemsetAsync(raw_buffer, 0, threads * sizeof(float), stream));
  CHECK_CUDA(cudaMemsetAsync(flow_buffer, 0, threads * sizeof(float), stream));

  Raw raw(n, raw_buffer, stream);
  flowdsl::Graph g;
  std::string previous;
  for (int i = 0; i < n; ++i) {
    auto k = g.kernel("k" + std::to_string(i), add_one).launch(1, threads).args(flow_buffer);
    if (!previous.empty()) k.after(previous);
    previous = k.name();
  }
  flowdsl::Runtime runtime;
  runtime.launch(g, stream);  // instantiates
  cudaGraphExec_t own = nullptr;
  runtime.inspect_executable(g, [&](const flowdsl::Executable& e) { own = e.native_executable(); });
  if (own == nullptr) {
    std::fprintf(stderr, "hit_launch_bench: the runtime's executable has no native handle\n");
    return 1;
  }
  CHECK_CUDA(cudaGraphLaunch(raw.exec.get(), stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));

  std::vector<double> raw_us, flow_us, exec_us;
  for (long i = 0; i < launches; ++i) {
    if (raw_on) {
      CHECK_CUDA(cudaStreamSynchronize(stream));
      const double t0 = bench::now_us();
      CHECK_CUDA(cudaGraphLaunch(raw.exec.get(), stream));
      raw_us.push_back(bench::now_us() - t0);
    }
    if (flow_on) {
      CHECK_CUDA(cudaStreamSynchronize(stream));
      const double t0 = bench::now_us();
      runtime.launch(g, stream);
      flow_us.push_back(bench::now_us() - t0);
    }
    if (exec_on) {
      CHECK_CUDA(cudaStreamSynchronize(stream));
      const double t0 = bench::now_us();
      CHECK_CUDA(cudaGraphLaunch(own, stream));
      exec_us.push_back(bench::now_us() - t0);
    }
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));

  // Each launch adds n to every element (a float stops growing at 2^24); one launch of each was
  // made before the timed ones.
  bool ok = true;
  for (auto [buffer, count] : {std::pair{raw_buffer, raw_on ? launches : 0}, std::pair{flow_buffer, (flow_on ? launches : 0) + (exec_on ? launches : 0)}}) {
    float host[threads];
    CHECK_CUDA(cudaMemcpy(host, buffer, sizeof host, cudaMemcpyDeviceToHost));
    const double total = static_cast<double>(n) * static_cast<double>(count + 1);
    const float want = static_cast<float>(total < 16777216.0 ? total : 16777216.0);
    for (float v : host) ok = ok && v == want;
  }
  std::printf("hit_launch_bench: N = %d, %ld launches, mode %s\n", n, launches, mode.c_str());
  if (raw_on && launches > 0) std::printf("raw     host us a launch, median %.3f\n", bench::median(raw_us));
  if (flow_on && launches > 0) std::printf("flowdsl host us a launch, median %.3f\n", bench::median(flow_us));
  if (exec_on && launches > 0) std::printf("exec    host us a launch, median %.3f\n", bench::median(exec_us));
  std::printf("results %s\n", ok ? "correct" : "WRONG");
  cudaFree(raw_buffer);
  cudaFree(flow_buffer);
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
}
