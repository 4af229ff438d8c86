// SPDX-License-Identifier: Apache-2.0
// A family of graphs on a GPU: every bucket's results equal those of its graph launched alone,
// whether made lazily or up front, rows past the batch's bucket untouched; each executable's
// device memory reported for graphs holding graph memory.
#include <cstring>
#include <random>

#include "flowdsl/flowdsl.hpp"
#include "gpu_support.cuh"

using flowdsl_test::DeviceBuffer;
using flowdsl_test::mismatches;
using flowdsl_test::random_floats;

namespace {

__global__ void square_rows(int n, const float* x, float* tmp) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) tmp[i] = x[i] * x[i];
}

__global__ void combine_rows(int n, float a, const float* tmp, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * tmp[i] + x[i];
}

constexpr int cols = 1000;  // not a multiple of the block size
constexpr int largest = 64;
constexpr std::uint32_t block = 128;

/// Buffers sized for the largest bucket, shared by every bucket's graph.
struct Rows {
  Rows() : x(std::size_t(largest) * cols), tmp(std::size_t(largest) * cols), y(std::size_t(largest) * cols) {}
  DeviceBuffer<float> x, tmp, y;
};

/// The step of `rows` rows: tmp = x², y = a tmp + x; with `scratch`, tmp is graph memory.
flowdsl::Graph step(Rows& r, int rows, float a, bool scratch = false) {
  const int n = rows * cols;
  const std::uint32_t grid = (std::uint32_t(n) + block - 1) / block;
  flowdsl::Graph g;
  if (!scratch) {
    auto square = g.kernel("square", square_rows).launch(grid, block).args(n, r.x.get(), r.tmp.get());
    g.kernel("combine", combine_rows).launch(grid, block).args(n, a, r.tmp.get(), r.x.get(), r.y.get()).after(square);
    return g;
  }
  auto tmp = g.alloc("tmp", std::size_t(n) * sizeof(float));
  auto square = g.kernel("square", square_rows).launch(grid, block).args(n, r.x.get(), tmp.ptr<float>()).after(tmp);
  auto combine =
      g.kernel("combine", combine_rows).launch(grid, block).args(n, a, tmp.ptr<float>(), r.x.get(), r.y.get()).after(square);
  g.free("release", tmp).after(combine);
  return g;
}

/// Elements of `y` that differ from the step's result over `rows` rows, or that a row past them
/// holds other than the poison (all bits set).
std::size_t wrong(const std::vector<float>& y, const std::vector<float>& x, float a, int rows) {
  const std::size_t n = std::size_t(rows) * cols;
  std::vector<float> want(x.begin(), x.begin() + std::ptrdiff_t(n));
  for (std::size_t i = 0; i < n; ++i) want[i] = a * (x[i] * x[i]) + x[i];
  std::size_t count = mismatches(std::vector<float>(y.begin(), y.begin() + std::ptrdiff_t(n)), want);
  for (std::size_t i = n; i < y.size(); ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &y[i], sizeof bits);
    count += bits != 0xffffffffu;
  }
  return count;
}

}  // namespace

TEST_CASE("Every bucket's results equal its graph's launched alone, lazily and up front", "[family][gpu]") {
  const bool up_front = GENERATE(false, true);
  INFO((up_front ? "prepared up front" : "lazily"));
  Rows r;
  const auto in = random_floats(std::size_t(largest) * cols, 31);
  r.x.upload(in);
  flowdsl::Runtime runtime;
  const auto stream = flowdsl::make_stream();
  flowdsl::Family family(runtime, flowdsl::Family::powers_of_two(largest), [&](int b) { return step(r, b, 0.5f); });
  if (up_front) {
    family.prepare(stream.get());
    CHECK(runtime.statistics().prepared == family.buckets().size());
  }
  std::mt19937 random(7);
  for (int launch = 0; launch < 40; ++launch) {
    const int batch = std::uniform_int_distribution<int>(1, largest)(random);
    const int bucket = family.bucket_for(batch);
    INFO("launch " << launch << ": batch " << batch << ", bucket " << bucket);
    r.y.poison();
    const flowdsl::LaunchReport report = family.launch(batch, stream.get());
    if (up_front) CHECK(report.kind == flowdsl::LaunchKind::hit);
    CHECK(report.kind != flowdsl::LaunchKind::updated);
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    const std::vector<float> from_family = r.y.download();
    CHECK(wrong(from_family, in, 0.5f, bucket) == 0);

    // The bucket's graph alone, on a runtime of its own: bit for bit the same.
    flowdsl::Runtime alone;
    flowdsl::Graph g = step(r, bucket, 0.5f);
    r.y.poison();
    alone.launch(g, stream);
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    const std::vector<float> from_alone = r.y.download();
    CHECK(std::memcmp(from_alone.data(), from_family.data(), from_family.size() * sizeof(float)) == 0);
  }
  const flowdsl::FamilyStatistics s = family.statistics();
  for (const flowdsl::BucketStatistics& b : s.buckets) {
    CHECK(b.ready == (up_front || b.launches > 0));
    if (b.ready) CHECK(b.instantiate_ms > 0);
  }
  CHECK(runtime.statistics().node_updates == 0);
}

TEST_CASE("A family of graphs holding graph memory reports what its executables took", "[family][gpu][memory]") {
  Rows r;
  const auto in = random_floats(std::size_t(largest) * cols, 32);
  r.x.upload(in);
  flowdsl::Runtime runtime;
  const auto stream = flowdsl::make_stream();
  flowdsl::Family family(runtime, {8, largest}, [&](int b) { return step(r, b, 2.0f, true); });
  family.prepare(stream.get());
  const flowdsl::FamilyStatistics s = family.statistics();
  REQUIRE(s.buckets.size() == 2);
  // What the largest bucket allocates must have come from the device by the time both are ready.
  CHECK(s.device_memory >= std::uint64_t(largest) * cols * sizeof(float));
  CHECK(s.largest_device_memory <= s.device_memory);
  for (int batch : {3, 40, 8, 64}) {
    r.y.poison();
    family.launch(batch, stream.get());
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    INFO("batch " << batch);
    CHECK(wrong(r.y.download(), in, 2.0f, family.bucket_for(batch)) == 0);
  }
}
