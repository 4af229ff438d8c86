// SPDX-License-Identifier: Apache-2.0
// All-reduce through a flowdsl graph against NCCL called directly and NCCL captured into a plain
// CUDA graph, in one run, nccl-tests style: out of place, f32 sum, sizes from 8 B to --max-bytes
// doubling; per size the time per operation, algorithm and bus bandwidth (bus = alg x 2(n-1)/n);
// then the latency at --latency-bytes with more iterations. Each variant's result is checked
// (rank r sends r + 1 everywhere: every element must be n(n+1)/2) after its timed launches.
//
//   NCCL_NVLS_ENABLE=0 mpirun -np 2 ./nccl_allreduce [--json out.json]
//
// One process per GPU; rank, size and NCCL's id come from the launcher (flowdsl::nccl::Bootstrap).
// Plain NCCL is called through the same library flowdsl opened, so all three run the same NCCL.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common.cuh"  // SAMPLE_CHECK
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/nccl.hpp"
#include "nccl/nccl_library.hpp"

namespace nccl = flowdsl::nccl;

namespace {


struct Timer {
  flowdsl::EventHandle start = flowdsl::make_event(cudaEventDefault), stop = flowdsl::make_event(cudaEventDefault);
};

__global__ void fill_kernel(float* p, std::size_t n, float v) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) p[i] = v;
}

__global__ void count_wrong_kernel(const float* p, std::size_t n, float want, unsigned long long* wrong) {
  unsigned long long mine = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    mine += p[i] != want;
  }
  if (mine != 0) atomicAdd(wrong, mine);
}

// Times `iterations` calls of `enqueue(stream)` back to back, after `warmup` more; microseconds per call.
template <class Enqueue>
double time_us(cudaStream_t stream, int warmup, int iterations, Enqueue&& enqueue) {
  for (int i = 0; i < warmup; ++i) enqueue(stream);
  Timer t;
  SAMPLE_CHECK(cudaEventRecord(t.start.get(), stream));
  for (int i = 0; i < iterations; ++i) enqueue(stream);
  SAMPLE_CHECK(cudaEventRecord(t.stop.get(), stream));
  SAMPLE_CHECK(cudaEventSynchronize(t.stop.get()));
  float ms = 0;
  SAMPLE_CHECK(cudaEventElapsedTime(&ms, t.start.get(), t.stop.get()));
  return 1000.0 * ms / iterations;
}

struct Row {
  std::size_t bytes;
  double plain_us, captured_us, flowdsl_us;
  bool correct;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"All-reduce: flowdsl graph vs NCCL direct vs NCCL captured into a CUDA graph"};
  std::size_t max_bytes = std::size_t(1) << 30, latency_bytes = 8192;
  int latency_iterations = 2000;
  std::string json_out;
  app.add_option("--max-bytes", max_bytes, "largest message (default 1 GiB)");
  app.add_option("--latency-bytes", latency_bytes, "message of the latency measurement (default 8 KB)");
  app.add_option("--latency-iterations", latency_iterations, "operations timed for the latency (default 2000)");
  app.add_option("--json", json_out, "write every figure to this file (rank 0)");
  CLI11_PARSE(app, argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }

  try {
    const nccl::Communicator comm;
    const int rank = comm.rank(), world = comm.size();
    const nccl::detail::Api& api = nccl::detail::api();
    const std::size_t max_count = std::max<std::size_t>(max_bytes, latency_bytes) / sizeof(float);
    float *send = nullptr, *recv = nullptr;
    unsigned long long* wrong = nullptr;
    SAMPLE_CHECK(cudaMalloc(&send, max_count * sizeof(float)));
    SAMPLE_CHECK(cudaMalloc(&recv, max_count * sizeof(float)));
    SAMPLE_CHECK(cudaMalloc(&wrong, sizeof *wrong));
    const flowdsl::StreamHandle stream = flowdsl::make_stream();
    fill_kernel<<<1024, 256, 0, stream.get()>>>(send, max_count, float(rank + 1));
    SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
    const float want = float(world) * float(world + 1) / 2.0f;
    const auto check = [&](std::size_t count) {
      SAMPLE_CHECK(cudaMemsetAsync(wrong, 0, sizeof *wrong, stream.get()));
      count_wrong_kernel<<<1024, 256, 0, stream.get()>>>(recv, count, want, wrong);
      unsigned long long host = 0;
      SAMPLE_CHECK(cudaMemcpyAsync(&host, wrong, sizeof host, cudaMemcpyDeviceToHost, stream.get()));
      SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
      return host == 0;
    };
    const auto poison = [&](std::size_t count) {
      SAMPLE_CHECK(cudaMemsetAsync(recv, 0xff, count * sizeof(float), stream.get()));
    };

    flowdsl::Runtime runtime;
    const auto measure = [&](std::size_t count, int warmup, int iterations) {
      Row row{count * sizeof(float), 0, 0, 0, true};
      poison(count);
      row.plain_us = time_us(stream.get(), warmup, iterations, [&](cudaStream_t s) {
        nccl::detail::check(api.all_reduce(send, recv, count, ncclFloat32, ncclSum, comm.get(), s), "ncclAllReduce");
      });
      row.correct = check(count) && row.correct;

      // NCCL captured into a plain CUDA graph: one operation per launch, like the flowdsl graph.
      cudaGraph_t graph = nullptr;
      SAMPLE_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
      nccl::detail::check(api.all_reduce(send, recv, count, ncclFloat32, ncclSum, comm.get(), stream.get()), "ncclAllReduce");
      SAMPLE_CHECK(cudaStreamEndCapture(stream.get(), &graph));
      cudaGraphExec_t exec = nullptr;
      SAMPLE_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      poison(count);
      row.captured_us = time_us(stream.get(), warmup, iterations, [&](cudaStream_t s) { SAMPLE_CHECK(cudaGraphLaunch(exec, s)); });
      row.correct = check(count) && row.correct;
      SAMPLE_CHECK(cudaGraphExecDestroy(exec));
      SAMPLE_CHECK(cudaGraphDestroy(graph));

      flowdsl::Graph g;
      nccl::all_reduce(g, "all_reduce", comm, send, recv, count, ncclFloat32, ncclSum);
      poison(count);
      row.flowdsl_us = time_us(stream.get(), warmup, iterations, [&](cudaStream_t s) { runtime.launch(g, s); });
      row.correct = check(count) && row.correct;
      return row;
    };

    const double bus_factor = world > 1 ? 2.0 * (world - 1) / world : 1.0;
    if (rank == 0) {
      std::printf("all-reduce, f32 sum, out of place, %d rank%s, NCCL %d (%s)\n", world, world == 1 ? "" : "s",
                  nccl::library_version(), api.library.c_str());
      std::printf("%12s %12s %12s %12s %10s %10s %10s %8s %s\n", "bytes", "plain us", "captured us", "flowdsl us",
                  "plain bus", "capt. bus", "flow. bus", "fl/plain", "check");
    }
    std::vector<Row> rows;
    bool all_correct = true;
    for (std::size_t bytes = 8; bytes <= max_bytes; bytes *= 2) {
      const std::size_t count = bytes / sizeof(float);
      const int iterations = bytes >= (std::size_t(64) << 20) ? 20 : bytes >= (std::size_t(1) << 20) ? 50 : 200;
      const Row row = measure(count, 5, iterations);
      rows.push_back(row);
      all_correct = all_correct && row.correct;
      const auto bus = [&](double us) { return double(row.bytes) / (us * 1e3) * bus_factor; };  // GB/s
      if (rank == 0) {
        std::printf("%12zu %12.2f %12.2f %12.2f %10.2f %10.2f %10.2f %8.3f %s\n", row.bytes, row.plain_us, row.captured_us,
                    row.flowdsl_us, bus(row.plain_us), bus(row.captured_us), bus(row.flowdsl_us),
                    bus(row.flowdsl_us) / bus(row.plain_us), row.correct ? "ok" : "WRONG");
      }
    }
    const Row latency = measure(latency_bytes / sizeof(float), 50, latency_iterations);
    all_correct = all_correct && latency.correct;
    if (rank == 0) {
      std::printf("latency at %zu B (%d operations): plain %.2f us, captured graph %.2f us, flowdsl %.2f us "
                  "(flowdsl - captured %+.2f us) %s\n",
                  latency.bytes, latency_iterations, latency.plain_us, latency.captured_us, latency.flowdsl_us,
                  latency.flowdsl_us - latency.captured_us, latency.correct ? "ok" : "WRONG");
    }
    const flowdsl::RuntimeStatistics s = runtime.statistics();
    std::printf("rank %d: results %s; flowdsl launches %llu, misses %llu\n", rank, all_correct ? "correct" : "WRONG",
                static_cast<unsigned long long>(s.launches), static_cast<unsigned long long>(s.misses));
    if (rank == 0 && !json_out.empty()) {
      nlohmann::json j;
      j["world"] = world;
      j["nccl_version"] = nccl::library_version();
      for (const Row& r : rows) {
        j["sizes"].push_back({{"bytes", r.bytes}, {"plain_us", r.plain_us}, {"captured_us", r.captured_us},
                              {"flowdsl_us", r.flowdsl_us}, {"bus_factor", bus_factor}, {"correct", r.correct}});
      }
      j["latency"] = {{"bytes", latency.bytes}, {"plain_us", latency.plain_us}, {"captured_us", latency.captured_us},
                      {"flowdsl_us", latency.flowdsl_us}, {"iterations", latency_iterations}};
      std::ofstream(json_out) << j.dump(2) << "\n";
    }
    SAMPLE_CHECK(cudaFree(send));
    SAMPLE_CHECK(cudaFree(recv));
    SAMPLE_CHECK(cudaFree(wrong));
    return all_correct ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_allreduce: %s\n", e.what());
    return 1;
  }
}
