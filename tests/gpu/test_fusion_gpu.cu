// SPDX-License-Identifier: Apache-2.0
// Fusion on a GPU: a chain of every element-wise kernel, in every element type, gives the same
// bytes fused as unfused (vector path, element path, unaligned pointers, in bodies); members'
// arguments update in place without compiling; compiled kernels serve other Graphs and Runtimes.
#include <cstring>
#include <optional>
#include <type_traits>
#include <string>
#include <vector>

#include "flowdsl/flowdsl.hpp"
#include "flowdsl/kernels.hpp"
#include "gpu_support.cuh"

using flowdsl_test::DeviceBuffer;
using flowdsl_test::random_floats;
namespace fk = flowdsl::kernels;

namespace {

void register_once() {
  static const bool done = [] {
    fk::register_builtins(flowdsl::KernelRegistry::global());  // the pass reads the element functions
    return true;
  }();
  (void)done;
}

/// Elements of `size` bytes that differ (a count, not the vectors: Catch would print them whole).
std::size_t differing(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, std::size_t size) {
  if (a.size() != b.size()) return a.size() + b.size();
  std::size_t count = 0;
  for (std::size_t i = 0; i < a.size(); i += size) count += std::memcmp(a.data() + i, b.data() + i, size) != 0;
  return count;
}

template <class T>
std::vector<unsigned char> bytes_of(const T* device, std::size_t n) {
  std::vector<unsigned char> host(n * sizeof(T));
  CUDA_REQUIRE(cudaMemcpy(host.data(), device, host.size(), cudaMemcpyDeviceToHost));
  return host;
}

/// The buffers of one chain: float inputs, T intermediates, a T output y and its cast z in O.
template <class T, class O>
struct Buffers {
  explicit Buffers(std::size_t n) : xf(n + 1), bf(n + 1), x(n + 1), b(n + 1), c(n + 1), t1(n + 1), t2(n + 1), t3(n + 1),
                                    t4(n + 1), y(n + 1), z(n + 1), x_alt(n + 1) {}
  DeviceBuffer<float> xf, bf;
  DeviceBuffer<T> x, b, c, t1, t2, t3, t4, y;
  DeviceBuffer<O> z;
  DeviceBuffer<float> x_alt;
  /// One stream for every launch: on a new stream the first launch of a cached executable may
  /// count it busy and make another (a pool per topology, see docs/architecture.md).
  flowdsl::StreamHandle stream = flowdsl::make_stream();
};

/// inputs (cast to T unless T is float) -> fill, iota, scale, axpy, add, multiply, clamp -> y -> cast -> z:
/// one run of every element-wise kernel. `skew` offsets every pointer by that many elements.
template <class T, class O>
struct Chain {
  Chain(fk::Into into, Buffers<T, O>& buf, std::int64_t n, std::size_t skew) {
    const T* x = buf.x.get() + skew;
    const T* b = buf.b.get() + skew;
    if constexpr (!std::is_same_v<T, float>) {
      first = fk::cast(into, "x_in", n, static_cast<const float*>(buf.xf.get() + skew), buf.x.get() + skew);
      last = fk::cast(into, "b_in", n, static_cast<const float*>(buf.bf.get() + skew), buf.b.get() + skew).after(first);
    } else {
      x = reinterpret_cast<const T*>(buf.xf.get() + skew);
      b = reinterpret_cast<const T*>(buf.bf.get() + skew);
    }
    auto then = [&](flowdsl::NodeHandle node) {
      if (last.id() != flowdsl::no_node) node.after(last);
      if (first.id() == flowdsl::no_node) first = node;
      last = node;
    };
    T* c = buf.c.get() + skew;
    T* t1 = buf.t1.get() + skew;
    T* t2 = buf.t2.get() + skew;
    T* t3 = buf.t3.get() + skew;
    T* t4 = buf.t4.get() + skew;
    T* y = buf.y.get() + skew;
    then(fk::fill(into, "fill", n, 0.75f, c));
    then(fk::iota(into, "iota", n, -0.5f, 1e-3f, t1));
    scale.emplace(fk::scale(into, "scale", n, 1.7f, x, t2));
    then(*scale);
    then(fk::axpy(into, "axpy", n, 0.3f, static_cast<const T*>(t2), t1));
    then(fk::add(into, "add", n, static_cast<const T*>(t1), b, t3));
    then(fk::multiply(into, "multiply", n, static_cast<const T*>(t3), static_cast<const T*>(c), t4));
    then(fk::clamp(into, "clamp", n, -0.8f, 0.9f, static_cast<const T*>(t4), y));
    then(fk::cast(into, "cast", n, static_cast<const T*>(y), buf.z.get() + skew));
  }
  flowdsl::NodeHandle first{nullptr, flowdsl::no_node};
  flowdsl::NodeHandle last{nullptr, flowdsl::no_node};
  std::optional<flowdsl::KernelNode<fk::i64, float, const T*, T*>> scale;
};

/// Names y and z as read after launches: y is otherwise an intermediate the cast alone reads,
/// which a fused graph keeps in registers.
template <class T, class O>
void mark_outputs(flowdsl::Graph& g, Buffers<T, O>& buf) {
  g.output("y", buf.y.get(), buf.y.bytes()).output("z", buf.z.get(), buf.z.bytes());
}

/// y and z of a launch of `g` on fresh inputs, outputs poisoned first.
template <class T, class O>
std::pair<std::vector<unsigned char>, std::vector<unsigned char>> run(flowdsl::Runtime& runtime, const flowdsl::Graph& g,
                                                                      Buffers<T, O>& buf, std::size_t n, std::size_t skew,
                                                                      flowdsl::LaunchKind* kind = nullptr) {
  buf.xf.upload(random_floats(n + 1, 7));
  buf.bf.upload(random_floats(n + 1, 8));
  buf.y.poison();
  buf.z.poison();
  const flowdsl::LaunchReport report = runtime.launch(g, buf.stream.get());
  if (kind != nullptr) *kind = report.kind;
  CUDA_REQUIRE(cudaStreamSynchronize(buf.stream.get()));
  return {bytes_of(buf.y.get() + skew, n), bytes_of(buf.z.get() + skew, n)};
}

template <class T, class O>
void same_bytes_fused_and_not(std::size_t n, std::size_t skew) {
  register_once();
  Buffers<T, O> buf(n);
  flowdsl::Graph plain, fused;
  fused.fuse(true);
  Chain<T, O> a(plain, buf, static_cast<std::int64_t>(n), skew);
  Chain<T, O> b(fused, buf, static_cast<std::int64_t>(n), skew);
  REQUIRE(fused.plan().fusion != nullptr);
  CHECK_FALSE(fused.plan().fusion->groups[0].stored[fused.size() - 2]);  // y, read by the cast alone
  mark_outputs(plain, buf);
  mark_outputs(fused, buf);
  REQUIRE(fused.plan().fusion != nullptr);
  CHECK(fused.plan().fusion->groups[0].stored[fused.size() - 2]);
  REQUIRE(fused.plan().fusion->groups.size() == 1);
  CHECK(fused.plan().fusion->groups[0].members.size() == fused.size());
  flowdsl::Runtime runtime;
  const auto want = run(runtime, plain, buf, n, skew);
  const auto got = run(runtime, fused, buf, n, skew);
  CHECK(differing(want.first, got.first, sizeof(T)) == 0);
  CHECK(differing(want.second, got.second, sizeof(O)) == 0);
  // Not equal by accident: the output varies.
  bool varies = false;
  for (std::size_t i = 1; i < n && !varies; ++i) varies = std::memcmp(want.first.data(), want.first.data() + i * sizeof(T), sizeof(T)) != 0;
  CHECK(varies);
}

}  // namespace

TEST_CASE("Fused chains give the unfused chains' bytes in every element type", "[fusion][gpu]") {
  for (std::size_t n : {std::size_t{1} << 20, (std::size_t{1} << 20) + 3, std::size_t{5}}) {
    for (std::size_t skew : {std::size_t{0}, std::size_t{1}}) {
      INFO("n = " << n << ", pointers offset by " << skew << " elements");
      same_bytes_fused_and_not<float, __nv_bfloat16>(n, skew);
      same_bytes_fused_and_not<__half, float>(n, skew);
      same_bytes_fused_and_not<__nv_bfloat16, __half>(n, skew);
    }
  }
}

TEST_CASE("Members' arguments update the fused kernel in place, with no compilation", "[fusion][gpu][update]") {
  register_once();
  const std::size_t n = 1 << 16;
  Buffers<float, __half> buf(n);
  flowdsl::Graph plain, fused;
  fused.fuse(true);
  Chain<float, __half> a(plain, buf, n, 0);
  Chain<float, __half> b(fused, buf, n, 0);
  mark_outputs(plain, buf);
  mark_outputs(fused, buf);
  flowdsl::Runtime runtime;
  flowdsl::LaunchKind kind{};
  run(runtime, fused, buf, n, 0, &kind);
  CHECK(kind == flowdsl::LaunchKind::instantiated);
  const std::uint64_t compiled = flowdsl::fused_kernel_statistics().compilations;

  a.scale->arg<1>(-2.25f);
  b.scale->arg<1>(-2.25f);
  const auto want = run(runtime, plain, buf, n, 0);
  const auto got = run(runtime, fused, buf, n, 0, &kind);
  CHECK(kind == flowdsl::LaunchKind::updated);
  CHECK(differing(want.first, got.first, sizeof(float)) + differing(want.second, got.second, 1) == 0);

  // Another input buffer: a parameter too.
  a.scale->arg<2>(static_cast<const float*>(buf.x_alt.get()));
  b.scale->arg<2>(static_cast<const float*>(buf.x_alt.get()));
  buf.x_alt.upload(random_floats(n + 1, 9));
  const auto want_alt = run(runtime, plain, buf, n, 0);
  const auto got_alt = run(runtime, fused, buf, n, 0, &kind);
  CHECK(kind == flowdsl::LaunchKind::updated);
  CHECK(differing(want_alt.first, got_alt.first, sizeof(float)) + differing(want_alt.second, got_alt.second, 1) == 0);
  CHECK(flowdsl::fused_kernel_statistics().compilations == compiled);
  CHECK(runtime.statistics().reinstantiations == 0);
}

TEST_CASE("A compiled kernel serves other Graphs and Runtimes", "[fusion][gpu][cache]") {
  register_once();
  const std::size_t n = 4096;
  Buffers<float, __nv_bfloat16> buf(n);
  flowdsl::Graph first;
  first.fuse(true);
  Chain<float, __nv_bfloat16> c1(first, buf, n, 0);
  mark_outputs(first, buf);
  flowdsl::Runtime r1;
  run(r1, first, buf, n, 0);
  const flowdsl::FusedKernelStatistics before = flowdsl::fused_kernel_statistics();
  flowdsl::Graph second;
  second.fuse(true);
  Chain<float, __nv_bfloat16> c2(second, buf, n, 0);
  mark_outputs(second, buf);
  flowdsl::Runtime r2;
  flowdsl::LaunchKind kind{};
  const auto got = run(r2, second, buf, n, 0, &kind);
  CHECK(kind == flowdsl::LaunchKind::instantiated);
  const flowdsl::FusedKernelStatistics after = flowdsl::fused_kernel_statistics();
  CHECK(after.compilations == before.compilations);
  CHECK(after.memory_hits == before.memory_hits + 1);
  const auto again = run(r1, first, buf, n, 0);
  CHECK(differing(again.first, got.first, sizeof(float)) + differing(again.second, got.second, 1) == 0);
}

TEST_CASE("Fused kernels inside a child graph and a conditional body", "[fusion][gpu][nesting]") {
  register_once();
  const std::size_t n = 1 << 18;
  Buffers<__half, float> buf(n);
  flowdsl::Graph plain, fused;
  fused.fuse(true);
  for (flowdsl::Graph* g : {&plain, &fused}) {
    auto stage = g->child("stage");
    Chain<__half, float> in_child(stage.body(), buf, n, 0);
    auto maybe = g->if_then("maybe", flowdsl::ConditionDefault{1}).after(stage);
    fk::scale(maybe.body(), "again", static_cast<fk::i64>(n), 0.5f, static_cast<const __half*>(buf.y.get()), buf.t4.get());
    fk::clamp(maybe.body(), "bound", static_cast<fk::i64>(n), -0.1f, 0.1f, static_cast<const __half*>(buf.t4.get()),
              buf.y.get())
        .after("again");
  }
  REQUIRE(fused.plan().fusion != nullptr);
  CHECK(fused.plan().fusion->groups.size() == 2);
  flowdsl::Runtime runtime;
  const auto want = run(runtime, plain, buf, n, 0);
  const auto got = run(runtime, fused, buf, n, 0);
  CHECK(differing(want.first, got.first, sizeof(float)) + differing(want.second, got.second, 1) == 0);
}
