// SPDX-License-Identifier: Apache-2.0
// Event nodes on a GPU: a graph on one stream waits, without a host synchronisation, for what a
// graph on another stream recorded after a slow kernel; events updated in place; eager launches.
#include <algorithm>

#include "flowdsl/flowdsl.hpp"
#include "gpu_support.cuh"

using flowdsl_test::DeviceBuffer;

namespace {

constexpr int n = 256;
// SM cycles the writer spins: about 50 ms at the H200's 2 GHz, far longer than launching the reader.
constexpr unsigned long long slow_cycles = 100'000'000;

// Spins for `cycles` SM cycles, then writes `value` to out[0..blockDim.x).
__global__ void slow_fill_kernel(unsigned long long cycles, float* out, float value) {
  const long long start = clock64();
  while (static_cast<unsigned long long>(clock64() - start) < cycles) {
  }
  out[threadIdx.x] = value;
}

__global__ void copy_kernel(int count, const float* in, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = in[i];
}

/// writer: slow fill of `data`, then record `event`. reader: wait for `event`, copy `data` to `out`.
struct Pair {
  explicit Pair(cudaEvent_t event) : data(n), out(n) {
    fill = writer.kernel("fill", slow_fill_kernel).launch(1, n).args(slow_cycles, data.get(), 1.0f);
    record = writer.record_event("written", event).after(fill);
    wait = reader.wait_event("wait", event);
    reader.kernel("copy", copy_kernel).launch(1, n).args(n, static_cast<const float*>(data.get()), out.get()).after(wait);
  }

  void poison() {
    data.poison();
    out.poison();
  }
  bool all(float value) const {
    const std::vector<float> got = out.download();
    return std::all_of(got.begin(), got.end(), [&](float v) { return v == value; });
  }

  DeviceBuffer<float> data, out;
  flowdsl::Graph writer, reader;
  flowdsl::KernelNode<unsigned long long, float*, float> fill{nullptr, 0};
  flowdsl::EventRecordNode record{nullptr, 0};
  flowdsl::EventWaitNode wait{nullptr, 0};
};

}  // namespace

TEST_CASE("A graph waits for an event another graph records, across streams", "[event][gpu]") {
  const flowdsl::EventHandle first = flowdsl::make_event(cudaEventDisableTiming);
  const flowdsl::EventHandle second = flowdsl::make_event(cudaEventDisableTiming);
  Pair p(first.get());
  flowdsl::Runtime runtime;
  const auto writing = flowdsl::make_stream();
  const auto reading = flowdsl::make_stream();

  p.poison();
  CHECK(runtime.launch(p.writer, writing).kind == flowdsl::LaunchKind::instantiated);
  CHECK(runtime.launch(p.reader, reading).kind == flowdsl::LaunchKind::instantiated);
  CUDA_REQUIRE(cudaStreamSynchronize(reading.get()));  // the reader's stream alone
  CHECK(p.all(1.0f));

  // Another event, and another value: both event nodes are updated in place.
  p.record.set(second.get());
  p.wait.set(second.get());
  p.fill.arg<2>(2.0f);
  CUDA_REQUIRE(cudaDeviceSynchronize());
  p.poison();
  const flowdsl::LaunchReport wrote = runtime.launch(p.writer, writing);
  const flowdsl::LaunchReport read = runtime.launch(p.reader, reading);
  CUDA_REQUIRE(cudaStreamSynchronize(reading.get()));
  CHECK(wrote.kind == flowdsl::LaunchKind::updated);
  CHECK(wrote.nodes_updated == 2);
  CHECK(read.kind == flowdsl::LaunchKind::updated);
  CHECK(read.nodes_updated == 1);
  CHECK(p.all(2.0f));
  CHECK(runtime.statistics().reinstantiations == 0);
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

TEST_CASE("Launched eagerly, event nodes record and wait on their streams", "[event][gpu][eager]") {
  const flowdsl::EventHandle event = flowdsl::make_event(cudaEventDisableTiming);
  Pair p(event.get());
  const auto writing = flowdsl::make_stream();
  const auto reading = flowdsl::make_stream();
  p.poison();
  flowdsl::launch_eagerly(p.writer, writing.get());
  flowdsl::launch_eagerly(p.reader, reading.get());
  CUDA_REQUIRE(cudaStreamSynchronize(reading.get()));
  CHECK(p.all(1.0f));
  CUDA_REQUIRE(cudaDeviceSynchronize());
}
