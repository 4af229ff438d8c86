// SPDX-License-Identifier: Apache-2.0
// Programmatic edges on a GPU: a chain of built-in kernels, each reading what the one before it
// wrote, gives the same bytes with programmatic edges as with full ones, and the host's result.
#include <cstring>

#include "flowdsl/flowdsl.hpp"
#include "flowdsl/kernels.hpp"
#include "gpu_support.cuh"

using flowdsl_test::DeviceBuffer;
using flowdsl_test::mismatches;
using flowdsl_test::random_floats;
namespace fk = flowdsl::kernels;

namespace {

constexpr std::int64_t n = 1 << 20;  // several waves of blocks: the trigger fires late, the wait matters
constexpr int links = 40;

/// a -> b -> a -> ...: link i scales the previous link's output by 1.5 (even i) or 0.8 (odd i), so
/// a consumer that ran before its producer finished would read stale data.
struct Chain {
  Chain(bool programmatic) : a(n), b(n) {
    flowdsl::NodeHandle previous{nullptr, 0};
    for (int i = 0; i < links; ++i) {
      float* from = i % 2 ? b.get() : a.get();
      float* to = i % 2 ? a.get() : b.get();
      const std::string name = "link" + std::to_string(i);
      flowdsl::NodeHandle node = fk::scale(g, name, n, i % 2 == 0 ? 1.5f : 0.8f, static_cast<const float*>(from), to);
      if (i > 0) {
        if (programmatic) {
          node.after(previous, flowdsl::programmatic);
        } else {
          node.after(previous);
        }
      }
      previous = node;
    }
  }
  /// The host's result of the chain from `in`.
  static std::vector<float> reference(std::vector<float> v) {
    for (int i = 0; i < links; ++i) {
      for (float& e : v) e = (i % 2 == 0 ? 1.5f : 0.8f) * e;
    }
    return v;
  }
  const float* output() const { return links % 2 ? b.get() : a.get(); }

  DeviceBuffer<float> a, b;
  flowdsl::Graph g;
};

std::vector<float> download(const float* d, std::size_t count) {
  std::vector<float> host(count);
  CUDA_REQUIRE(cudaMemcpy(host.data(), d, count * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace

TEST_CASE("A chain with programmatic edges computes what the chain with full edges does", "[programmatic][gpu]") {
  const std::vector<float> in = random_floats(n, 41);
  Chain full(false), early(true);
  REQUIRE(full.g.topology_hash() != early.g.topology_hash());
  flowdsl::Runtime runtime;
  const auto stream = flowdsl::make_stream();
  for (Chain* c : {&full, &early}) {
    for (int launch = 0; launch < 3; ++launch) {
      c->a.upload(in);
      c->b.poison();
      runtime.launch(c->g, stream);
      CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    }
  }
  const std::vector<float> got_full = download(full.output(), n), got_early = download(early.output(), n);
  CHECK(std::memcmp(got_full.data(), got_early.data(), n * sizeof(float)) == 0);
  CHECK(mismatches(got_early, Chain::reference(in)) == 0);
  CHECK(runtime.statistics().misses == 2);
}

TEST_CASE("A programmatic edge inside a child graph", "[programmatic][gpu][nesting]") {
  const std::vector<float> in = random_floats(n, 42);
  Chain early(true);
  flowdsl::Graph outer;
  auto stage = outer.child("stage", early.g);
  (void)stage;
  flowdsl::Runtime runtime;
  const auto stream = flowdsl::make_stream();
  early.a.upload(in);
  early.b.poison();
  runtime.launch(outer, stream);
  CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(mismatches(download(early.output(), n), Chain::reference(in)) == 0);
}
