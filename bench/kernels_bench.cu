// SPDX-License-Identifier: Apache-2.0
// kernels_bench: achieved bandwidth of the memory-bound kernels against a device-to-device
// cudaMemcpy measured in the same run, and matmul TFLOP/s against cuBLAS in the same run.
//
//   kernels_bench [--quick] [--repeats R] [--json FILE] [--matmul-only] [--matmul-sweep] [--only TEXT]...
//
// --only TEXT (repeatable) times only the rows whose name contains one of the TEXTs (the copy
// baseline always runs), e.g. --only random_normal --only matmul. --matmul-only skips every
// memory-bound row. --matmul-sweep also times every variant of the Hopper matmul (tile width 256,
// 128 or 64; k split across a cluster of 1 to 8 blocks) at the matmul rows' shapes (bf16, float
// c), each against cuBLAS and checked against it, beside the launch rule's own choice: the data
// the rule is tuned from.
//
// Method: inputs are random (never zeros), each kernel is the one node of a flowdsl::Graph
// launched by cudaLaunchKernel from its description (so the graph launch cost is not timed),
// 3 warm-up runs, then R runs timed one by one with CUDA events; the median is reported.
// Bytes are the fewest the operation must move (each input read once, each output written
// once); the copy moves 2 bytes per byte copied (read + write). Buffers are 1 GiB per operand
// (--quick: 64 MiB), far beyond the 50 MB L2, so repeats do not run from cache.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "common.cuh"
#include "eager.cuh"
#include "flowdsl/kernels.hpp"

namespace fk = flowdsl::kernels;

namespace {

struct Row {
  std::string name;
  double bytes = 0, flops = 0, ms = 0;
  double percent = 0;  ///< of copy bandwidth (memory rows) or of cuBLAS (matmul rows)
};

int repeats = 20;
std::vector<std::string> only;  ///< --only: substrings of the row names to run; empty: all

bool wanted(const std::string& name) {
  if (only.empty()) return true;
  return std::any_of(only.begin(), only.end(), [&](const std::string& part) { return name.find(part) != std::string::npos; });
}

/// Median of `repeats` event-timed runs of `enqueue`, after 3 warm-up runs; `before` (if set) is
/// enqueued ahead of each run, outside the events.
double time_ms(cudaStream_t stream, const std::function<void()>& enqueue, const std::function<void()>& before = {}) {
  for (int i = 0; i < 3; ++i) {
    if (before) before();
    enqueue();
  }
  SAMPLE_CHECK(cudaStreamSynchronize(stream));
  SAMPLE_CHECK(cudaGetLastError());
  cudaEvent_t start, stop;
  SAMPLE_CHECK(cudaEventCreate(&start));
  SAMPLE_CHECK(cudaEventCreate(&stop));
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    if (before) before();
    SAMPLE_CHECK(cudaEventRecord(start, stream));
    enqueue();
    SAMPLE_CHECK(cudaEventRecord(stop, stream));
    SAMPLE_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    SAMPLE_CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  SAMPLE_CHECK(cudaGetLastError());
  SAMPLE_CHECK(cudaEventDestroy(start));
  SAMPLE_CHECK(cudaEventDestroy(stop));
  return sample::median(ms);
}

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

/// As time_ms, with a kernel spinning for about 50 us ahead of each start event, so that the
/// host's work to enqueue (an eager launch's, cuBLAS's) is done while the device is busy and
/// the events time the device alone.
double time_device_ms(cudaStream_t stream, const std::function<void()>& enqueue) {
  return time_ms(stream, enqueue, [&] {
    spin<<<1, 1, 0, stream>>>(100000);
    SAMPLE_CHECK(cudaGetLastError());
  });
}

void* device_bytes(std::size_t bytes) {
  void* p = nullptr;
  SAMPLE_CHECK(cudaMalloc(&p, bytes));
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, matmul_only = false, matmul_sweep = false;
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json = argv[++i];
    } else if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--matmul-only")) {
      matmul_only = true;
    } else if (!std::strcmp(argv[i], "--matmul-sweep")) {
      matmul_sweep = true;
    } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      only.emplace_back(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--repeats R] [--json FILE] [--matmul-only] [--matmul-sweep] [--only TEXT]...\n",
                   argv[0]);
      return 2;
    }
  }
  if (!sample::have_device()) return sample::skipped;
  if (quick && repeats == 20) repeats = 5;
  cudaDeviceProp prop{};
  SAMPLE_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MB; repeats %d%s\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
              repeats, quick ? " (quick)" : "");

  const std::int64_t n = quick ? (std::int64_t{1} << 24) : (std::int64_t{1} << 28);  // floats per operand: 64 MiB / 1 GiB
  const std::size_t operand = std::size_t(n) * 4;
  char* a = static_cast<char*>(device_bytes(operand));
  char* b = static_cast<char*>(device_bytes(operand));
  char* c = static_cast<char*>(device_bytes(operand));
  double* partials = static_cast<double*>(device_bytes(fk::sum_max_partials * sizeof(double)));
  float* small = static_cast<float*>(device_bytes(std::size_t(n / 16) * 4 + 64));
  auto stream_handle = flowdsl::make_stream();
  cudaStream_t stream = stream_handle.get();
  flowdsl::Runtime runtime;

  // Random inputs in every operand (uniform in [-1, 1)).
  {
    flowdsl::Graph g;
    fk::random_uniform(g, "a", n, 1, -1.0f, 1.0f, reinterpret_cast<float*>(a));
    fk::random_uniform(g, "b", n, 2, -1.0f, 1.0f, reinterpret_cast<float*>(b));
    fk::random_uniform(g, "c", n, 3, -1.0f, 1.0f, reinterpret_cast<float*>(c));
    runtime.launch(g, stream);
    SAMPLE_CHECK(cudaStreamSynchronize(stream));
  }
  auto* fa = reinterpret_cast<float*>(a);
  auto* fb = reinterpret_cast<float*>(b);
  auto* fc = reinterpret_cast<float*>(c);
  // bfloat16 operands get their own random values (float bits read as bf16 would include
  // NaN and huge values).
  auto* ha = static_cast<__nv_bfloat16*>(device_bytes(operand));  // 2n bf16
  {
    flowdsl::Graph g;
    fk::random_uniform(g, "h", 2 * n, 4, -1.0f, 1.0f, ha);
    runtime.launch(g, stream);
    SAMPLE_CHECK(cudaStreamSynchronize(stream));
  }
  auto* hc = reinterpret_cast<__nv_bfloat16*>(c);

  std::vector<Row> rows;
  const double copy_ms = time_ms(stream, [&] { SAMPLE_CHECK(cudaMemcpyAsync(c, a, operand, cudaMemcpyDeviceToDevice, stream)); });
  const double copy_bw = 2.0 * operand / (copy_ms * 1e-3);
  rows.push_back({"cudaMemcpy D2D (baseline)", 2.0 * operand, 0, copy_ms, 100.0});

  // One node per graph, timed as a plain kernel launch.
  if (!matmul_only) {
  auto memory_row = [&](const std::string& name, double bytes, auto&& declare) {
    if (!wanted(name)) return;
    flowdsl::Graph g;
    declare(g);
    const double ms = time_ms(stream, [&] { flowdsl::launch_eagerly(g, stream); });
    rows.push_back({name, bytes, 0, ms, 100.0 * (bytes / (ms * 1e-3)) / copy_bw});
  };
  const double N = static_cast<double>(n);
  const int cols = 1024;
  const int row_count = static_cast<int>(n / cols);
  memory_row("fill f32", 4 * N, [&](flowdsl::Graph& g) { fk::fill(g, "k", n, 1.5f, fc); });
  memory_row("iota f32", 4 * N, [&](flowdsl::Graph& g) { fk::iota(g, "k", n, 0.0f, 1e-3f, fc); });
  memory_row("scale f32", 8 * N, [&](flowdsl::Graph& g) { fk::scale(g, "k", n, 0.5f, static_cast<const float*>(fa), fc); });
  memory_row("axpy f32", 12 * N, [&](flowdsl::Graph& g) { fk::axpy(g, "k", n, 0.5f, static_cast<const float*>(fa), fc); });
  memory_row("add f32", 12 * N, [&](flowdsl::Graph& g) { fk::add(g, "k", n, static_cast<const float*>(fa), static_cast<const float*>(fb), fc); });
  memory_row("multiply f32", 12 * N,
             [&](flowdsl::Graph& g) { fk::multiply(g, "k", n, static_cast<const float*>(fa), static_cast<const float*>(fb), fc); });
  memory_row("clamp f32", 8 * N, [&](flowdsl::Graph& g) { fk::clamp(g, "k", n, -0.5f, 0.5f, static_cast<const float*>(fa), fc); });
  memory_row("bias+gelu f32 [n/1024, 1024]", 8 * N, [&](flowdsl::Graph& g) {
    fk::bias_activation(g, "k", row_count, cols, fk::Activation::gelu, static_cast<const float*>(fa), static_cast<const float*>(fb), fc);
  });
  memory_row("bias+silu bf16 [2n/1024, 1024]", 8 * N, [&](flowdsl::Graph& g) {
    fk::bias_activation(g, "k", 2 * row_count, cols, fk::Activation::silu, static_cast<const __nv_bfloat16*>(ha),
                        static_cast<const __nv_bfloat16*>(ha), hc);
  });
  memory_row("bias+silu bf16 [~2n/1001, 1001] (bias by element)", 4.0 * (2 * n / 1001) * 1001, [&](flowdsl::Graph& g) {
    fk::bias_activation(g, "k", 2 * n / 1001, 1001, fk::Activation::silu, static_cast<const __nv_bfloat16*>(ha),
                        static_cast<const __nv_bfloat16*>(ha), hc);
  });
  memory_row("cast f32 -> bf16", 6 * N, [&](flowdsl::Graph& g) { fk::cast(g, "k", n, static_cast<const float*>(fa), hc); });
  memory_row("cast bf16 -> f32", 6 * N, [&](flowdsl::Graph& g) { fk::cast(g, "k", n, static_cast<const __nv_bfloat16*>(ha), fc); });
  memory_row("cast f32 -> f16", 6 * N,
             [&](flowdsl::Graph& g) { fk::cast(g, "k", n, static_cast<const float*>(fa), reinterpret_cast<__half*>(c)); });
  memory_row("random_uniform f32", 4 * N, [&](flowdsl::Graph& g) { fk::random_uniform(g, "k", n, 7, 0.0f, 1.0f, fc); });
  memory_row("random_normal f32", 4 * N, [&](flowdsl::Graph& g) { fk::random_normal(g, "k", n, 7, 0.0f, 1.0f, fc); });
  memory_row("row_sum f32 [n/1024, 1024]", 4 * N, [&](flowdsl::Graph& g) { fk::row_sum(g, "k", row_count, cols, static_cast<const float*>(fa), small); });
  memory_row("row_max f32 [n/1024, 1024]", 4 * N, [&](flowdsl::Graph& g) { fk::row_max(g, "k", row_count, cols, static_cast<const float*>(fa), small); });
  memory_row("row_argmax f32 [n/1024, 1024]", 4 * N, [&](flowdsl::Graph& g) {
    fk::row_argmax(g, "k", row_count, cols, static_cast<const float*>(fa), reinterpret_cast<std::int32_t*>(small));
  });
  memory_row("row_sum f32 [n/65536, 65536]", 4 * N, [&](flowdsl::Graph& g) {
    fk::row_sum(g, "k", static_cast<int>(n / 65536), 65536, static_cast<const float*>(fa), small);
  });
  memory_row("sum f32 (whole array, 2 nodes)", 4 * N, [&](flowdsl::Graph& g) { fk::sum(g, "k", n, static_cast<const float*>(fa), partials, small); });
  memory_row("softmax f32 [n/1024, 1024]", 8 * N, [&](flowdsl::Graph& g) { fk::softmax(g, "k", row_count, cols, static_cast<const float*>(fa), fc); });
  memory_row("softmax bf16 [2n/1024, 1024]", 8 * N, [&](flowdsl::Graph& g) { fk::softmax(g, "k", 2 * row_count, cols, static_cast<const __nv_bfloat16*>(ha), hc); });
  memory_row("softmax f32 [n/64, 64] (warp rows)", 8 * N, [&](flowdsl::Graph& g) {
    fk::softmax(g, "k", static_cast<int>(n / 64), 64, static_cast<const float*>(fa), fc);
  });
  memory_row("layer_norm f32 [n/1024, 1024]", 8 * N, [&](flowdsl::Graph& g) {
    fk::layer_norm(g, "k", row_count, cols, 1e-5f, static_cast<const float*>(fa), static_cast<const float*>(fb), static_cast<const float*>(fb) + cols, fc);
  });
  memory_row("layer_norm bf16 [2n/4096, 4096]", 8 * N, [&](flowdsl::Graph& g) {
    fk::layer_norm(g, "k", 2 * row_count / 4, 4096, 1e-5f, static_cast<const __nv_bfloat16*>(ha), static_cast<const float*>(fb),
                   static_cast<const float*>(fb) + 4096, hc);
  });
  {
    // Pad: rows of random length in [width/2, width] -> [batch, width] + mask.
    const int width = 1024, batch = row_count;
    std::vector<std::int32_t> offsets(batch + 1, 0);
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> length(width / 2, width);
    for (int i = 0; i < batch; ++i) offsets[i + 1] = offsets[i] + length(rng);
    auto* d_offsets = static_cast<std::int32_t*>(device_bytes(offsets.size() * 4));
    SAMPLE_CHECK(cudaMemcpyAsync(d_offsets, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice, stream));
    SAMPLE_CHECK(cudaStreamSynchronize(stream));  // `offsets` is pageable and read by the copy
    auto* mask = static_cast<std::uint8_t*>(device_bytes(std::size_t(n)));
    const double moved = 4.0 * offsets.back() + 4.0 * N + N + 4.0 * batch;
    memory_row("pad f32 -> [n/1024, 1024] + mask", moved, [&](flowdsl::Graph& g) {
      fk::pad(g, "k", batch, width, 0.0f, static_cast<const float*>(fa), d_offsets, fc, mask);
    });
    memory_row("crop f32 [n/1024, 1024] -> rows", 8.0 * offsets.back() + 4.0 * batch, [&](flowdsl::Graph& g) {
      fk::crop(g, "k", batch, width, 0.0f, static_cast<const float*>(fc), d_offsets, fb);
    });
    std::vector<std::int32_t> index(batch);
    for (int i = 0; i < batch; ++i) index[i] = i;
    std::shuffle(index.begin(), index.end(), rng);
    SAMPLE_CHECK(cudaMemcpyAsync(d_offsets, index.data(), index.size() * 4, cudaMemcpyHostToDevice, stream));
    SAMPLE_CHECK(cudaStreamSynchronize(stream));
    memory_row("gather_rows f32 [n/1024, 1024]", 8 * N, [&](flowdsl::Graph& g) {
      fk::gather_rows(g, "k", batch, width, d_offsets, batch, static_cast<const float*>(fa), fc);
    });
    SAMPLE_CHECK(cudaFree(mask));
    SAMPLE_CHECK(cudaFree(d_offsets));
  }
  {
    const int side = quick ? 4096 : 16384;  // side^2 = n floats
    memory_row("heat2d step f32 (+residual)", 8.0 * side * side, [&](flowdsl::Graph& g) {
      fk::heat2d_step(g, "k", side, side, 0.2f, static_cast<const float*>(fa), fc, partials, small);
    });
  }
  {
    const int envs = static_cast<int>(n / 8);  // state 4 floats + counters: fits the operands
    float* state = fc;
    float* reward = fb;
    auto* counters = reinterpret_cast<std::int32_t*>(fb + envs);
    auto* action = reinterpret_cast<std::int32_t*>(fb + 3 * envs);
    auto* done = reinterpret_cast<std::uint8_t*>(fb + 4 * envs);
    flowdsl::Graph init;
    fk::cartpole_reset(init, "reset", envs, 1, state, reward, counters, counters + envs, done);
    fk::random_uniform(init, "actions", envs, 3, 0.0f, 1.0f, reinterpret_cast<float*>(action));  // any bits: action != 1 -> left
    runtime.launch(init, stream);
    SAMPLE_CHECK(cudaStreamSynchronize(stream));
    memory_row("cartpole_step (53 B/env)", 53.0 * envs, [&](flowdsl::Graph& g) {
      fk::cartpole_step(g, "k", envs, 1, 500, action, state, reward, counters, counters + envs, done);
    });
  }

  }  // !matmul_only

  // Matmul, half/bfloat16 in, float accumulate, c in float (and, for the cast variant, in the
  // operands' type), against cuBLAS on the same operands: 4096^3 (--quick: 2048^3), 1024^3,
  // 128 x 4096 x 4096 (a small batch through a large layer) and the serving MLP's shapes.
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasCreate failed\n");
    return 1;
  }
  if (cublasSetStream(blas, stream) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasSetStream failed\n");
    return 1;
  }
  int failures = 0;
  struct Shape {
    int m, n, k;
  };
  const int big = quick ? 2048 : 4096;
  std::vector<Shape> shapes = {{big, big, big}, {1024, 1024, 1024}, {128, 4096, 4096}};
  // The serving MLP's layers at its batch buckets: 16 to 128 rows by 1024 x 4096, 4096 x 1024
  // and 1024 x 16 weights (the weights stay in the 50 MB L2 between launches, as they do when
  // a server replays the MLP; cuBLAS runs under the same conditions).
  for (const int m : {16, 32, 64, 128}) {
    for (const Shape nk : {Shape{0, 4096, 1024}, Shape{0, 1024, 4096}, Shape{0, 16, 1024}}) shapes.push_back({m, nk.n, nk.k});
  }
  auto matmul_rows = [&](auto tag, cudaDataType_t type, const char* label, const Shape& s) {
    using T = decltype(tag);
    if (!wanted(std::string("matmul ") + label)) return;
    const std::size_t a_elems = std::size_t(s.m) * s.k, b_elems = std::size_t(s.k) * s.n, c_elems = std::size_t(s.m) * s.n;
    T* A = reinterpret_cast<T*>(a);
    T* B = reinterpret_cast<T*>(b);
    float* C = fc;
    T* C_cast = reinterpret_cast<T*>(fc + c_elems);                    // after C in the same operand
    float* C_ref = reinterpret_cast<float*>(a + a_elems * sizeof(T));  // after A in the same operand
    {
      flowdsl::Graph init;  // random operands in [-1, 1)
      fk::random_uniform(init, "A", static_cast<std::int64_t>(a_elems), 11, -1.0f, 1.0f, A);
      fk::random_uniform(init, "B", static_cast<std::int64_t>(b_elems), 12, -1.0f, 1.0f, B);
      runtime.launch(init, stream);
    }
    const double flops = 2.0 * s.m * double(s.n) * s.k;
    const std::string shape = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
    flowdsl::Graph g, g_cast;
    fk::matmul(g, "k", s.m, s.n, s.k, static_cast<const T*>(A), static_cast<const T*>(B), static_cast<const float*>(nullptr),
               fk::Activation::none, C);
    fk::matmul_cast(g_cast, "k", s.m, s.n, s.k, static_cast<const T*>(A), static_cast<const T*>(B),
                    static_cast<const float*>(nullptr), fk::Activation::none, C_cast);
    // The eager launch encodes the tensor maps on the host each time: a busy stream ahead keeps
    // that host time out of the events (time_device_ms).
    const double ours = time_device_ms(stream, [&] { flowdsl::launch_eagerly(g, stream); });
    const double ours_cast = time_device_ms(stream, [&] { flowdsl::launch_eagerly(g_cast, stream); });
    const float one = 1.0f, zero = 0.0f;
    // Row-major C = A B is column-major C^T = B^T A^T: pass B first.
    auto gemm = [&] {
      const cublasStatus_t status = cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k, &one, B, type, s.n, A, type,
                                                 s.k, &zero, C_ref, CUDA_R_32F, s.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      if (status != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "cublasGemmEx failed: %d\n", static_cast<int>(status));
        std::exit(1);
      }
    };
    const double theirs = time_device_ms(stream, gemm);
    SAMPLE_CHECK(cudaStreamSynchronize(stream));
    // The same product as cuBLAS's (both accumulate in float; the cast variant rounds c to T)?
    std::vector<float> x(c_elems), y(c_elems);
    std::vector<T> xc(c_elems);
    SAMPLE_CHECK(cudaMemcpy(x.data(), C, c_elems * 4, cudaMemcpyDeviceToHost));
    SAMPLE_CHECK(cudaMemcpy(xc.data(), C_cast, c_elems * sizeof(T), cudaMemcpyDeviceToHost));
    SAMPLE_CHECK(cudaMemcpy(y.data(), C_ref, c_elems * 4, cudaMemcpyDeviceToHost));
    double num = 0, num_cast = 0, den = 0;
    for (std::size_t i = 0; i < c_elems; ++i) {
      const double d = double(x[i]) - y[i], dc = double(static_cast<float>(xc[i])) - y[i];
      num += d * d;
      num_cast += dc * dc;
      den += double(y[i]) * y[i];
    }
    const double error = std::sqrt(num / den), error_cast = std::sqrt(num_cast / den);
    // Float accumulation in another order: ~1e-6. Rounding c to half (2^-11) or bfloat16 (2^-8): a few 1e-4, 1e-3.
    const double limit = 1e-4, limit_cast = std::is_same_v<T, __half> ? 1e-3 : 8e-3;
    const bool ok = error <= limit && error_cast <= limit_cast;  // NaN fails too
    failures += ok ? 0 : 1;
    std::printf("matmul %s %s: ||flowdsl - cuBLAS|| / ||cuBLAS|| = %.2e (float c), %.2e (cast c)%s\n", label, shape.c_str(), error,
                error_cast, ok ? "" : "  FAILED");
    const std::string name = std::string("matmul ") + label + " " + shape;
    rows.push_back({name + " (flowdsl)", 0, flops, ours, 100.0 * theirs / ours});
    rows.push_back({name + " cast (flowdsl)", 0, flops, ours_cast, 100.0 * theirs / ours_cast});
    rows.push_back({name + " (cuBLAS)", 0, flops, theirs, 100.0});
  };
  for (const Shape& s : shapes) {
    matmul_rows(__half{}, CUDA_R_16F, "f16", s);
    matmul_rows(__nv_bfloat16{}, CUDA_R_16BF, "bf16", s);
  }

  // Every variant the kernel has at each shape: the grid and cluster the rule would choose set by
  // hand (tile width from the grid's x, k split from the cluster's z), bf16, float c.
  if (matmul_sweep) {
    using T = __nv_bfloat16;
    std::printf("\nmatmul variants, bf16, float c (us, median; ratio = cuBLAS / variant; * the rule's choice)\n");
    std::printf("%-16s %6s %6s %7s %9s %9s %7s %10s\n", "m x n x k", "tile", "split", "blocks", "us", "cuBLAS", "ratio", "rel.err");
    for (const Shape& s : shapes) {
      if (s.m * double(s.n) * s.k > 1.1e11) continue;  // 4096^3 runs wide tiles only
      const std::size_t a_elems = std::size_t(s.m) * s.k, c_elems = std::size_t(s.m) * s.n;
      T* A = reinterpret_cast<T*>(a);
      T* B = reinterpret_cast<T*>(b);
      float* C_ref = reinterpret_cast<float*>(a + a_elems * sizeof(T));
      {
        flowdsl::Graph init;
        fk::random_uniform(init, "A", static_cast<std::int64_t>(a_elems), 11, -1.0f, 1.0f, A);
        fk::random_uniform(init, "B", static_cast<std::int64_t>(std::size_t(s.k) * s.n), 12, -1.0f, 1.0f, B);
        runtime.launch(init, stream);
      }
      const float one = 1.0f, zero = 0.0f;
      const double theirs = time_device_ms(stream, [&] {
        if (cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k, &one, B, CUDA_R_16BF, s.n, A, CUDA_R_16BF, s.k, &zero,
                         C_ref, CUDA_R_32F, s.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
          std::fprintf(stderr, "cublasGemmEx failed\n");
          std::exit(1);
        }
      });
      std::vector<float> reference(c_elems), got(c_elems);
      SAMPLE_CHECK(cudaMemcpy(reference.data(), C_ref, c_elems * 4, cudaMemcpyDeviceToHost));
      const std::string shape = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
      const int k_tiles = (s.k + 63) / 64;
      // bn 0: the rule's own launch shape.
      for (const int bn : {0, 256, 128, 64}) {
        for (const int split : {1, 2, 3, 4, 5, 6, 8}) {
          if ((bn == 0 || bn == 256) && split > 1) break;
          if (split > k_tiles) break;
          flowdsl::Graph g;
          auto node = fk::matmul(g, "k", s.m, s.n, s.k, static_cast<const T*>(A), static_cast<const T*>(B),
                                 static_cast<const float*>(nullptr), fk::Activation::none, fc);
          const unsigned x = static_cast<unsigned>((s.n + std::max(bn, 1) - 1) / std::max(bn, 1));
          const unsigned y = static_cast<unsigned>((s.m + 127) / 128);
          if (bn != 0) node.grid(flowdsl::Dim3(x, y, static_cast<unsigned>(split))).cluster(flowdsl::Dim3(1, 1, static_cast<unsigned>(split)));
          SAMPLE_CHECK(cudaMemsetAsync(fc, 0xff, c_elems * 4, stream));  // NaN: a tile left unwritten fails the check
          const double ours = time_device_ms(stream, [&] { flowdsl::launch_eagerly(g, stream); });
          SAMPLE_CHECK(cudaMemcpy(got.data(), fc, c_elems * 4, cudaMemcpyDeviceToHost));
          double num = 0, den = 0;
          for (std::size_t i = 0; i < c_elems; ++i) {
            num += (double(got[i]) - reference[i]) * (double(got[i]) - reference[i]);
            den += double(reference[i]) * reference[i];
          }
          const double error = std::sqrt(num / den);
          const bool ok = error <= 1e-4;  // NaN fails too
          failures += ok ? 0 : 1;
          std::printf("%-16s %6s %6d %7u %9.2f %9.2f %7.3f %10.2e%s\n", shape.c_str(), bn == 0 ? "rule*" : std::to_string(bn).c_str(),
                      split, bn == 0 ? 0u : x * y * static_cast<unsigned>(split), 1e3 * ours, 1e3 * theirs, theirs / ours, error,
                      ok ? "" : "  FAILED");
        }
      }
    }
  }
  if (cublasDestroy(blas) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasDestroy failed\n");
    return 1;
  }

  std::printf("\n%-40s %10s %12s %12s %10s\n", "kernel", "ms", "GB/s", "TFLOP/s", "% of base");
  for (const Row& r : rows) {
    std::printf("%-40s %10.4f %12s %12s %9.1f%%\n", r.name.c_str(), r.ms,
                r.bytes > 0 ? std::to_string(static_cast<long long>(r.bytes / (r.ms * 1e6))).c_str() : "-",
                r.flops > 0 ? std::to_string(r.flops / (r.ms * 1e9)).substr(0, 7).c_str() : "-", r.percent);
  }
  std::printf("(%% of base: memory rows against the copy's bandwidth, %.0f GB/s; matmul rows against cuBLAS)\n", copy_bw / 1e9);

  if (json) {
    FILE* f = std::fopen(json, "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json);
      return 1;
    }
    std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"repeats\": %d,\n  \"quick\": %s,\n  \"copy_gb_per_s\": %.1f,\n  \"rows\": [\n",
                 prop.name, repeats, quick ? "true" : "false", copy_bw / 1e9);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(f, "    {\"name\": \"%s\", \"ms\": %.6f, \"bytes\": %.0f, \"flops\": %.0f, \"gb_per_s\": %.1f, \"tflop_per_s\": %.2f, \"percent_of_baseline\": %.1f}%s\n",
                   r.name.c_str(), r.ms, r.bytes, r.flops, r.bytes > 0 ? r.bytes / (r.ms * 1e6) : 0.0,
                   r.flops > 0 ? r.flops / (r.ms * 1e9) : 0.0, r.percent, i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
    std::printf("wrote %s\n", json);
  }
  if (failures > 0) {
    std::fprintf(stderr, "%d matmul result(s) differ from cuBLAS's\n", failures);
    return 1;
  }
  return 0;
}
