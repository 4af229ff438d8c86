// SPDX-License-Identifier: Apache-2.0
// Library nodes on a real GPU: a call recorded into the graph (results against host references
// on random data), recorded again in place when an argument changes, a recording of other nodes
// explained, every forbidden call named with the runtime usable afterwards, eager and debug
// launches, conditional bodies, what DOT says was recorded, and the built-in cuBLASLt products
// against a float64 reference.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>

#include "flowdsl/cublaslt.hpp"
#include "flowdsl/flowdsl.hpp"
#include "flowdsl/json.hpp"
#include "gpu_support.cuh"

using flowdsl_test::contains;
using flowdsl_test::DeviceBuffer;
using flowdsl_test::mismatches;
using flowdsl_test::random_floats;

namespace {

__global__ void scale_kernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

__global__ void add_constant_kernel(int n, float c, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += c;
}

std::atomic<int> calls{0};  // how often scale_call ran: each recording, each eager launch

// y = a x, and when `twice` is set y += 1 in a second kernel: the recording holds one or two.
cudaError_t scale_call(cudaStream_t stream, int n, float a, const float* x, float* y, int twice) {
  ++calls;
  scale_kernel<<<(n + 255) / 256, 256, 0, stream>>>(n, a, x, y);
  if (twice != 0) add_constant_kernel<<<(n + 255) / 256, 256, 0, stream>>>(n, 1.0f, y);
  return cudaGetLastError();
}

std::vector<float> scaled(const std::vector<float>& x, float a, bool twice) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = a * x[i] + (twice ? 1.0f : 0.0f);
  return y;
}

// Calls that break the rules of recording, each enqueuing a kernel first.
cudaError_t synchronising_call(cudaStream_t stream, int n, float* y) {
  add_constant_kernel<<<1, 32, 0, stream>>>(n, 1.0f, y);
  return cudaStreamSynchronize(stream);
}
cudaError_t allocating_call(cudaStream_t stream, int n, float* y) {
  add_constant_kernel<<<1, 32, 0, stream>>>(n, 1.0f, y);
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, 256);
  if (status == cudaSuccess) cudaFree(p);
  return status;
}
cudaError_t legacy_stream_call(cudaStream_t stream, int n, float* y) {
  add_constant_kernel<<<1, 32, 0, stream>>>(n, 1.0f, y);
  add_constant_kernel<<<1, 32>>>(n, 1.0f, y);  // the legacy default stream
  return cudaGetLastError();
}
cudaStream_t side_stream = nullptr;
cudaEvent_t fork_event = nullptr;
cudaError_t unjoined_call(cudaStream_t stream, int n, float* y) {
  cudaEventRecord(fork_event, stream);
  cudaStreamWaitEvent(side_stream, fork_event, 0);
  add_constant_kernel<<<1, 32, 0, side_stream>>>(n, 1.0f, y);  // never joined back
  return cudaGetLastError();
}
void host_step(void*) {}
// Records a host node beside its kernel: allowed at the top level, not in a conditional body.
cudaError_t host_function_call(cudaStream_t stream, int n, float* y) {
  add_constant_kernel<<<1, 32, 0, stream>>>(n, 1.0f, y);
  return cudaLaunchHostFunc(stream, host_step, nullptr);
}
void throwing_call(cudaStream_t, int, float*) { throw std::runtime_error("out of tokens"); }
int failing_call(cudaStream_t, int, float*) { return 7; }

struct Fixture {
  static constexpr int n = 3000;
  DeviceBuffer<float> x{n}, y{n}, z{n};
  std::vector<float> host_x = random_floats(n, 11);
  flowdsl::StreamHandle stream = flowdsl::make_stream();
  Fixture() { x.upload(host_x); }
  std::vector<float> result(const DeviceBuffer<float>& out) {
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    return out.download();
  }
};

}  // namespace

TEST_CASE("A library node's call is recorded into the graph and computes its result", "[library][gpu]") {
  Fixture f;
  f.y.poison();
  flowdsl::Graph g;
  auto lib = g.library("scale", scale_call).args(Fixture::n, 2.5f, f.x.get(), f.y.get(), 0);
  flowdsl::Runtime runtime;
  const int before = calls;
  CHECK(runtime.launch(g, f.stream.get()).kind == flowdsl::LaunchKind::instantiated);
  CHECK(mismatches(f.result(f.y), scaled(f.host_x, 2.5f, false)) == 0);
  CHECK(calls == before + 1);

  SECTION("a launch with nothing changed records nothing") {
    f.y.poison();
    CHECK(runtime.launch(g, f.stream.get()).kind == flowdsl::LaunchKind::hit);
    CHECK(mismatches(f.result(f.y), scaled(f.host_x, 2.5f, false)) == 0);
    CHECK(calls == before + 1);
  }
  SECTION("a changed argument records the call again and updates the executable in place") {
    f.z.poison();
    lib.arg<1>(-1.5f).arg<3>(f.z.get());
    const flowdsl::LaunchReport report = runtime.launch(g, f.stream.get());
    CHECK(report.kind == flowdsl::LaunchKind::updated);
    CHECK(report.nodes_updated == 1);
    CHECK(mismatches(f.result(f.z), scaled(f.host_x, -1.5f, false)) == 0);
    CHECK(runtime.statistics().reinstantiations == 0);
    CHECK(calls == before + 2);
  }
  SECTION("a recording of other nodes re-instantiates, and the report says why") {
    f.y.poison();
    lib.arg<4>(1);
    CHECK_THAT(runtime.explain(g, f.stream.get()).text(), contains("'scale'"));
    const flowdsl::LaunchReport report = runtime.launch(g, f.stream.get());
    CHECK(report.kind == flowdsl::LaunchKind::reinstantiated);
    CHECK_THAT(report.reason, contains("node 'scale': recorded body changed: 1 kernel \u2192 2 kernels"));
    CHECK(mismatches(f.result(f.y), scaled(f.host_x, 2.5f, true)) == 0);
    CHECK(runtime.statistics().reinstantiations == 1);
  }
}

TEST_CASE("A library node runs between other nodes, in eager and debug launches too", "[library][gpu]") {
  Fixture f;
  flowdsl::Graph g;
  auto before = g.kernel("before", scale_kernel).launch((Fixture::n + 255) / 256, 256).args(Fixture::n, 2.0f, f.x.get(), f.z.get());
  auto lib = g.library("lib", scale_call).args(Fixture::n, 3.0f, f.z.get(), f.y.get(), 1).after(before);
  g.kernel("after", add_constant_kernel).launch((Fixture::n + 255) / 256, 256).args(Fixture::n, 0.5f, f.y.get()).after(lib);
  std::vector<float> want = scaled(scaled(f.host_x, 2.0f, false), 3.0f, true);
  for (float& v : want) v += 0.5f;

  f.y.poison();
  flowdsl::Runtime runtime;
  runtime.launch(g, f.stream.get());
  CHECK(mismatches(f.result(f.y), want) == 0);

  f.y.poison();
  flowdsl::launch_eagerly(g, f.stream.get());
  CHECK(mismatches(f.result(f.y), want) == 0);

  f.y.poison();
  flowdsl::RuntimeOptions options;
  options.debug = true;
  flowdsl::Runtime debug(options);
  CHECK(debug.launch(g, f.stream.get()).kind == flowdsl::LaunchKind::debug);
  CHECK(mismatches(f.result(f.y), want) == 0);
}

TEST_CASE("A library node inside a child body is recorded there", "[library][gpu][nesting]") {
  Fixture f;
  f.y.poison();
  flowdsl::Graph g;
  auto stage = g.child("stage");
  auto lib = stage.body().library("lib", scale_call).args(Fixture::n, 4.0f, f.x.get(), f.y.get(), 0);
  flowdsl::Runtime runtime;
  runtime.launch(g, f.stream.get());
  CHECK(mismatches(f.result(f.y), scaled(f.host_x, 4.0f, false)) == 0);
  lib.arg<1>(-2.0f);
  CHECK(runtime.launch(g, f.stream.get()).kind == flowdsl::LaunchKind::updated);
  CHECK(mismatches(f.result(f.y), scaled(f.host_x, -2.0f, false)) == 0);
}

TEST_CASE("A library node in a conditional body runs when the condition holds", "[library][gpu][conditional]") {
  Fixture f;
  for (const unsigned taken : {1u, 0u}) {
    INFO("condition " << taken);
    f.y.poison();
    flowdsl::Graph g;
    g.memset("clear", f.y.get(), 0, f.y.bytes());
    auto gate = g.if_then("gate", flowdsl::ConditionDefault{taken}).after("clear");
    gate.body().library("lib", scale_call).args(Fixture::n, 2.0f, f.x.get(), f.y.get(), 1);
    flowdsl::Runtime runtime;
    runtime.launch(g, f.stream.get());
    CHECK(mismatches(f.result(f.y), taken ? scaled(f.host_x, 2.0f, true) : std::vector<float>(Fixture::n, 0.0f)) == 0);
  }
}

TEST_CASE("A call that records a node CUDA refuses in a conditional body is named", "[library][gpu][conditional][errors]") {
  Fixture f;
  flowdsl::Runtime runtime;
  {
    flowdsl::Graph g;  // at the top level a host node is fine
    g.library("host", host_function_call).args(Fixture::n, f.y.get());
    runtime.launch(g, f.stream.get());
    CUDA_REQUIRE(cudaStreamSynchronize(f.stream.get()));
  }
  flowdsl::Graph g;
  auto gate = g.if_then("gate", flowdsl::ConditionDefault{1});
  gate.body().library("host", host_function_call).args(Fixture::n, f.y.get());
  // Named by its type; the advice about NCCL's event nodes is for those types only.
  CHECK_THROWS_WITH(runtime.launch(g, f.stream.get()), contains("gate/host") && contains("conditional") &&
                                                           contains("a host node") && !contains("NCCL"));
  CHECK(cudaGetLastError() == cudaSuccess);
  // The runtime builds and runs a good graph afterwards.
  f.y.poison();
  flowdsl::Graph good;
  good.library("good", scale_call).args(Fixture::n, 1.5f, f.x.get(), f.y.get(), 0);
  runtime.launch(good, f.stream.get());
  CHECK(mismatches(f.result(f.y), scaled(f.host_x, 1.5f, false)) == 0);
}

TEST_CASE("DOT shows what a library node recorded", "[library][gpu][dot]") {
  Fixture f;
  flowdsl::Graph g;
  auto first = g.kernel("first", scale_kernel).launch((Fixture::n + 255) / 256, 256).args(Fixture::n, 2.0f, f.x.get(), f.z.get());
  g.library("lib", scale_call).args(Fixture::n, 3.0f, f.z.get(), f.y.get(), 1).after(first);
  flowdsl::Runtime runtime;
  std::vector<flowdsl::Recording> recorded = flowdsl::recordings(runtime, g);
  CHECK(std::none_of(recorded.begin(), recorded.end(), [](const flowdsl::Recording& r) { return r.known; }));
  runtime.launch(g, f.stream.get());
  CUDA_REQUIRE(cudaStreamSynchronize(f.stream.get()));
  recorded = flowdsl::recordings(runtime, g);
  REQUIRE(recorded.size() == 2);
  CHECK_FALSE(recorded[0].known);  // a kernel node: nothing recorded
  CHECK(recorded[1].known);
  CHECK(recorded[1].kernels == 2);
  CHECK(recorded[1].others == 0);
  flowdsl::DotOptions options;
  options.recordings = &recorded;
  CHECK_THAT(flowdsl::to_dot(g, options), contains("recorded: 2 kernels"));
}

TEST_CASE("A call that breaks the rules of recording is named, and the runtime stays usable", "[library][gpu][errors]") {
  Fixture f;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&side_stream, cudaStreamNonBlocking));
  CUDA_REQUIRE(cudaEventCreateWithFlags(&fork_event, cudaEventDisableTiming));
  flowdsl::Runtime runtime;
  const auto fails = [&](auto call, const std::string& message) {
    flowdsl::Graph g;
    g.library("bad", call).args(Fixture::n, f.y.get());
    INFO(message);
    CHECK_THROWS_WITH(runtime.launch(g, f.stream.get()), contains("node 'bad'") && contains(message));
    CHECK(cudaGetLastError() == cudaSuccess);
    cudaStreamCaptureStatus status{};
    CUDA_REQUIRE(cudaStreamIsCapturing(f.stream.get(), &status));
    CHECK(status == cudaStreamCaptureStatusNone);
  };
  fails(synchronising_call, "cannot be recorded");
  fails(allocating_call, "cannot be recorded");
  fails(legacy_stream_call, "legacy default stream");
  fails(unjoined_call, "cudaErrorStreamCaptureUnjoined");
  fails(throwing_call, "its call threw: out of tokens");
  fails(failing_call, "the call returned status 7");

  // The same runtime builds and runs a good graph afterwards.
  f.y.poison();
  flowdsl::Graph good;
  good.library("good", scale_call).args(Fixture::n, 1.5f, f.x.get(), f.y.get(), 0);
  runtime.launch(good, f.stream.get());
  CHECK(mismatches(f.result(f.y), scaled(f.host_x, 1.5f, false)) == 0);
  CUDA_REQUIRE(cudaStreamSynchronize(side_stream));
  cudaEventDestroy(fork_event);
  cudaStreamDestroy(side_stream);
}

namespace {

float round_to(float v, bool bf16) {
  return bf16 ? __bfloat162float(__float2bfloat16_rn(v)) : __half2float(__float2half_rn(v));
}

double tanh_gelu(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

// c = epilogue(a b + bias) in float64 from the operands as stored.
std::vector<double> reference_product(int m, int n, int k, const std::vector<float>& a, const std::vector<float>& b,
                                      const std::vector<float>& bias, flowdsl::kernels::Epilogue e) {
  std::vector<double> c(std::size_t(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = e == flowdsl::kernels::Epilogue::none ? 0.0 : bias[j];
      for (int l = 0; l < k; ++l) acc += double(a[std::size_t(i) * k + l]) * b[std::size_t(l) * n + j];
      if (e == flowdsl::kernels::Epilogue::bias_gelu) acc = tanh_gelu(acc);
      if (e == flowdsl::kernels::Epilogue::bias_relu) acc = acc > 0 ? acc : 0;
      c[std::size_t(i) * n + j] = acc;
    }
  }
  return c;
}

template <class T>
std::vector<T> to_device_type(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = T(v[i]);
  return out;
}

template <class T>
float to_float(T v) {
  return static_cast<float>(v);
}

// ||got - want|| / ||want||, NaN never passing.
template <class Out>
double relative_error(const std::vector<Out>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = to_float(got[i]);
    if (!std::isfinite(g)) return INFINITY;
    diff += (g - want[i]) * (g - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / norm);
}

template <class T, class Out>
void check_cublaslt_product(int m, int n, int k, flowdsl::kernels::Epilogue e, unsigned seed) {
  constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  std::vector<float> a = random_floats(std::size_t(m) * k, seed), b = random_floats(std::size_t(k) * n, seed + 1),
                     bias = random_floats(std::size_t(n), seed + 2);
  for (float& v : a) v = round_to(v, bf16);
  for (float& v : b) v = round_to(v, bf16);
  if constexpr (!std::is_same_v<Out, float>) {
    for (float& v : bias) v = round_to(v, bf16);
  }
  DeviceBuffer<T> da(a.size()), db(b.size());
  DeviceBuffer<Out> dbias(bias.size()), dc(std::size_t(m) * n), dc2(std::size_t(m) * n);
  da.upload(to_device_type<T>(a));
  db.upload(to_device_type<T>(b));
  dbias.upload(to_device_type<Out>(bias));
  dc.poison();
  dc2.poison();
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  flowdsl::Graph g;
  auto mm = flowdsl::kernels::cublaslt_matmul<T, Out>(g, "mm", m, n, k, da.get(), db.get(), dbias.get(), e, dc.get());
  flowdsl::Runtime runtime;
  runtime.launch(g, stream.get());
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  const std::vector<double> want = reference_product(m, n, k, a, b, bias, e);
  const double tolerance = std::is_same_v<Out, float> ? 2e-3 : 1e-2;
  INFO("m " << m << " n " << n << " k " << k << " epilogue " << int(e));
  CHECK(relative_error(dc.download(), want) < tolerance);
  // An update that moves the output: recorded again, in place.
  mm.template arg<7>(dc2.get());
  CHECK(runtime.launch(g, stream.get()).kind == flowdsl::LaunchKind::updated);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(relative_error(dc2.download(), want) < tolerance);
  CHECK(runtime.statistics().reinstantiations == 0);
}

}  // namespace

TEST_CASE("cuBLASLt products as library nodes match a float64 reference", "[library][gpu][cublaslt]") {
  using flowdsl::kernels::Epilogue;
  check_cublaslt_product<__nv_bfloat16, __nv_bfloat16>(37, 200, 72, Epilogue::bias_gelu, 1);
  check_cublaslt_product<__nv_bfloat16, float>(16, 1024, 4096, Epilogue::bias, 2);
  check_cublaslt_product<__nv_bfloat16, __nv_bfloat16>(128, 4096, 1024, Epilogue::bias_relu, 3);
  check_cublaslt_product<__half, __half>(64, 1024, 4096, Epilogue::none, 4);
  check_cublaslt_product<__half, float>(5, 16, 1024, Epilogue::bias_gelu, 5);
}

TEST_CASE("A graph file's cuBLASLt node runs like the C++ one", "[library][gpu][cublaslt][json]") {
  flowdsl::KernelRegistry registry;
  flowdsl::kernels::register_builtins(registry);
  const int m = 8, n = 64, k = 32;
  const std::string text = R"({"version": 1, "name": "mm", "buffers": [
      {"name": "a", "type": "bf16", "count": 256}, {"name": "b", "type": "bf16", "count": 2048},
      {"name": "bias", "type": "f32", "count": 64}, {"name": "c", "type": "f32", "count": 512}],
    "nodes": [{"name": "mm", "kind": "library", "call": "cublaslt.matmul.bf16.f32",
               "args": {"m": 8, "n": 64, "k": 32, "a": "a", "b": "b", "bias": "bias", "epilogue": 1, "c": "c"}}]})";
  std::vector<float> a = random_floats(m * k, 7), b = random_floats(k * n, 8), bias = random_floats(n, 9);
  for (float& v : a) v = round_to(v, true);
  for (float& v : b) v = round_to(v, true);
  DeviceBuffer<__nv_bfloat16> da(a.size()), db(b.size());
  DeviceBuffer<float> dbias(bias.size()), dc(std::size_t(m) * n);
  da.upload(to_device_type<__nv_bfloat16>(a));
  db.upload(to_device_type<__nv_bfloat16>(b));
  dbias.upload(bias);
  dc.poison();
  const flowdsl::Graph g = flowdsl::bind_graph(flowdsl::parse_graph(text), {{"a", da.get()}, {"b", db.get()},
                                                                            {"bias", dbias.get()}, {"c", dc.get()}},
                                               registry);
  const flowdsl::StreamHandle stream = flowdsl::make_stream();
  flowdsl::Runtime runtime;
  runtime.launch(g, stream.get());
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(relative_error(dc.download(), reference_product(m, n, k, a, b, bias, flowdsl::kernels::Epilogue::bias)) < 2e-3);
}
