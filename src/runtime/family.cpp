// SPDX-License-Identifier: Apache-2.0
// A family of graphs, one per batch bucket: picks the bucket a batch falls in, builds and makes
// ready each bucket's graph once, and reports what the family holds.
#include "flowdsl/family.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "flowdsl/error.hpp"
#include "log_internal.hpp"

namespace flowdsl {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string list(const std::vector<int>& values) {
  std::string text;
  for (int v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return text;
}

}  // namespace

struct Family::Impl {
  struct Bucket {
    int size = 0;
    std::shared_ptr<Graph> graph;
    std::uint64_t launches = 0;
    double build_ms = 0;
    double instantiate_ms = 0;
  };

  Runtime* runtime;
  SharedBuilder build;
  std::vector<int> sizes;
  std::vector<Bucket> buckets;

  std::size_t index_for(int batch) const {
    if (batch <= 0) throw UsageError("flowdsl: family: batch " + std::to_string(batch) + " is not positive");
    const auto it = std::lower_bound(sizes.begin(), sizes.end(), batch);
    if (it == sizes.end()) {
      throw UsageError("flowdsl: family: batch " + std::to_string(batch) + " exceeds the largest bucket, " +
                       std::to_string(sizes.back()));
    }
    return static_cast<std::size_t>(it - sizes.begin());
  }

  Graph& built(Bucket& b) {
    if (!b.graph) {
      const auto start = Clock::now();
      std::shared_ptr<Graph> g = build(b.size);
      if (!g) throw UsageError("flowdsl: family: the builder gave no graph for bucket " + std::to_string(b.size));
      b.graph = std::move(g);
      // Buckets launched in turn would otherwise share one executable per topology and update
      // whatever differs at every turn.
      b.graph->own_executable(true);
      b.build_ms = ms_since(start);
      FLOWDSL_DEBUG("family: bucket {} built in {:.3f} ms ({} nodes)", b.size, b.build_ms, b.graph->size());
    }
    return *b.graph;
  }

  void make_ready(Bucket& b, cudaStream_t stream) {
    Graph& g = built(b);
    const auto start = Clock::now();
    if (runtime->prepare(g, stream).kind == LaunchKind::instantiated) b.instantiate_ms = ms_since(start);
  }
};

Family::Family(Runtime& runtime, std::vector<int> buckets, Builder build)
    : Family(runtime, std::move(buckets), build ? SharedBuilder([build = std::move(build)](int b) {
      return std::make_shared<Graph>(build(b));
    })
                                                : SharedBuilder()) {}

Family::Family(Runtime& runtime, std::vector<int> buckets, SharedBuilder build) {
  if (buckets.empty()) throw UsageError("flowdsl: family: no bucket");
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i] <= 0 || (i > 0 && buckets[i] <= buckets[i - 1])) {
      throw UsageError("flowdsl: family: buckets must be positive and increasing, not " + list(buckets));
    }
  }
  if (!build) throw UsageError("flowdsl: family: no builder");
  if (runtime.capacity() < buckets.size()) {
    detail::log().warn("family of {} buckets on a runtime that caches {} executables: evicted buckets are "
                       "instantiated again",
                       buckets.size(), runtime.capacity());
  }
  impl_ = std::make_unique<Impl>();
  impl_->runtime = &runtime;
  impl_->build = std::move(build);
  impl_->buckets.resize(buckets.size());
  for (std::size_t i = 0; i < buckets.size(); ++i) impl_->buckets[i].size = buckets[i];
  impl_->sizes = std::move(buckets);
}

Family::~Family() = default;
Family::Family(Family&&) noexcept = default;
Family& Family::operator=(Family&&) noexcept = default;

std::vector<int> Family::powers_of_two(int largest) {
  if (largest <= 0) throw UsageError("flowdsl: family: largest bucket " + std::to_string(largest) + " is not positive");
  std::vector<int> out;
  for (long long b = 1; b <= largest; b *= 2) out.push_back(static_cast<int>(b));
  if (out.back() != largest) out.push_back(largest);
  return out;
}

const std::vector<int>& Family::buckets() const noexcept { return impl_->sizes; }

int Family::bucket_for(int batch) const { return impl_->sizes[impl_->index_for(batch)]; }

Graph& Family::graph_for(int batch) { return impl_->built(impl_->buckets[impl_->index_for(batch)]); }

void Family::prepare(cudaStream_t stream) {
  for (Impl::Bucket& b : impl_->buckets) impl_->make_ready(b, stream);
}

LaunchReport Family::launch(int batch, cudaStream_t stream) {
  Impl::Bucket& b = impl_->buckets[impl_->index_for(batch)];
  Graph& g = impl_->built(b);
  const auto start = Clock::now();
  LaunchReport report = impl_->runtime->launch(g, stream);
  if (report.kind == LaunchKind::instantiated) b.instantiate_ms = ms_since(start);
  ++b.launches;
  return report;
}

FamilyStatistics Family::statistics() const {
  FamilyStatistics out;
  for (const Impl::Bucket& b : impl_->buckets) {
    BucketStatistics s;
    s.bucket = b.size;
    s.built = b.graph != nullptr;
    s.launches = b.launches;
    s.build_ms = b.build_ms;
    s.instantiate_ms = b.instantiate_ms;
    if (b.graph) {
      s.ready = impl_->runtime->inspect_executable(*b.graph, [&](const Executable& e) { s.device_memory = e.device_memory(); });
    }
    out.device_memory += s.device_memory;
    out.largest_device_memory = std::max(out.largest_device_memory, s.device_memory);
    out.buckets.push_back(s);
  }
  return out;
}

}  // namespace flowdsl
