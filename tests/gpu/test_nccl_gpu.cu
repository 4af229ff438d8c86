// SPDX-License-Identifier: Apache-2.0
// NCCL collectives in graphs, one process per GPU: recording into the graph, results against host
// references on random data (rank r's input is x + r, which every rank can compute), arguments
// updated in place, a graph relaunched 1000 times, collectives inside WHILE and IF bodies, graph
// files, errors naming the node with the runtime usable afterwards. Run alone it is one rank, where
// NCCL makes most collectives copies (avg on floats runs its PreMulSum kernel): the plumbing.
// Under a launcher (NCCL_NVLS_ENABLE=0 mpirun -np 2 ./test_nccl_gpu) every rank runs the same test
// cases in the same order, and the collectives are real.
#include <cstdlib>
#include <string>
#include <vector>

#include "flowdsl/flowdsl.hpp"
#include "flowdsl/json.hpp"
#include "flowdsl/nccl.hpp"
#include "gpu_support.cuh"

using flowdsl_test::contains;
using flowdsl_test::DeviceBuffer;
using flowdsl_test::mismatches;
using flowdsl_test::random_floats;
namespace nccl = flowdsl::nccl;
using flowdsl::LaunchKind;

namespace {

__global__ void add_one_kernel(int n, float* x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

__global__ void double_kernel(int n, float* x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}

__global__ void increment_kernel(int* counter) {
  if (threadIdx.x == 0) ++*counter;
}

__global__ void keep_below_kernel(const int* counter, int limit, flowdsl::Condition loop) {
  if (threadIdx.x == 0) loop.set(*counter < limit ? 1u : 0u);
}

constexpr int n = 4099;  // not a multiple of anything NCCL or a vector path likes
constexpr int blocks = (n + 255) / 256;

// Rank r's input: the same random values on every rank, plus r.
std::vector<float> input_of(int rank) {
  std::vector<float> x = random_floats(n, 29);
  for (float& v : x) v += static_cast<float>(rank);
  return x;
}

struct Fixture {
  nccl::Communicator comm{nccl::bootstrap_from_environment()};
  int rank = comm.rank(), world = comm.size();
  flowdsl::StreamHandle stream = flowdsl::make_stream();
  std::vector<float> host_x = input_of(rank);
  DeviceBuffer<float> x{n};

  Fixture() { x.upload(host_x); }
  // Element-wise sum of every rank's input, each plus `c` first.
  std::vector<float> sum_of_inputs(float c = 0.0f) const {
    std::vector<float> s(n, 0.0f);
    for (int r = 0; r < world; ++r) {
      const std::vector<float> in = input_of(r);
      for (int i = 0; i < n; ++i) s[i] += in[i] + c;
    }
    return s;
  }
  std::vector<float> result(const DeviceBuffer<float>& out) {
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    CUDA_REQUIRE(cudaGetLastError());
    return out.download();
  }
};


}  // namespace

TEST_CASE("Every collective computes its result inside a graph", "[nccl][gpu]") {
  Fixture f;
  CHECK(f.comm.size() >= 1);
  CHECK(nccl::library_version() >= 21400);  // ncclCommFinalize
  const int w = f.world;
  DeviceBuffer<float> reduced{n}, averaged{n}, gathered{std::size_t(n) * w}, scattered{n}, broadcast{n}, exchanged{n};
  for (DeviceBuffer<float>* b : {&reduced, &averaged, &gathered, &scattered, &broadcast, &exchanged}) b->poison();

  flowdsl::Graph g;
  const int next = (f.rank + 1) % w, previous = (f.rank + w - 1) % w;
  auto sum = nccl::all_reduce(g, "sum", f.comm, f.x.get(), reduced.get(), n, ncclFloat32, ncclSum);
  auto avg = nccl::all_reduce(g, "avg", f.comm, f.x.get(), averaged.get(), n, ncclFloat32, ncclAvg).after(sum);
  auto gather = nccl::all_gather(g, "gather", f.comm, f.x.get(), gathered.get(), n, ncclFloat32).after(avg);
  auto scatter =
      nccl::reduce_scatter(g, "scatter", f.comm, gathered.get(), scattered.get(), n, ncclFloat32, ncclMax).after(gather);
  auto bcast = nccl::broadcast(g, "bcast", f.comm, f.x.get(), broadcast.get(), n, ncclFloat32, w - 1).after(scatter);
  nccl::send_recv(g, "ring", f.comm, f.x.get(), next, exchanged.get(), previous, n, ncclFloat32).after(bcast);

  flowdsl::Runtime runtime;
  CHECK(runtime.launch(g, f.stream.get()).kind == LaunchKind::instantiated);
  std::vector<float> mean = f.sum_of_inputs(), all;
  for (float& v : mean) v /= static_cast<float>(w);
  for (int r = 0; r < w; ++r) {
    const std::vector<float> in = input_of(r);
    all.insert(all.end(), in.begin(), in.end());
  }
  CHECK(mismatches(f.result(reduced), f.sum_of_inputs()) == 0);
  CHECK(mismatches(f.result(averaged), mean) == 0);
  CHECK(mismatches(f.result(gathered), all, 0.0f) == 0);
  // max over the ranks of their gathered block `rank`: all gathered the same, so input_of(rank)
  CHECK(mismatches(f.result(scattered), input_of(f.rank), 0.0f) == 0);
  CHECK(mismatches(f.result(broadcast), input_of(w - 1), 0.0f) == 0);
  CHECK(mismatches(f.result(exchanged), input_of(previous), 0.0f) == 0);
  SECTION("a launch with nothing changed is a hit and computes the same") {
    exchanged.poison();
    CHECK(runtime.launch(g, f.stream.get()).kind == LaunchKind::hit);
    CHECK(mismatches(f.result(exchanged), input_of(previous), 0.0f) == 0);
  }
}

TEST_CASE("A collective's arguments are parameters: updated in place, never re-instantiated", "[nccl][gpu][update]") {
  Fixture f;
  DeviceBuffer<float> y{n}, z{n};
  y.poison();
  flowdsl::Graph g;
  auto bump = g.kernel("bump", add_one_kernel).launch(blocks, 256).args(n, f.x.get());
  auto sum = nccl::all_reduce(g, "sum", f.comm, f.x.get(), y.get(), n, ncclFloat32, ncclSum).after(bump);
  flowdsl::Runtime runtime;
  runtime.launch(g, f.stream.get());
  CHECK(mismatches(f.result(y), f.sum_of_inputs(1.0f)) == 0);

  z.poison();
  sum.set<float*>("recv", z.get());
  const flowdsl::LaunchExplanation explained = runtime.explain(g, f.stream.get());
  CHECK(explained.kind == LaunchKind::updated);
  REQUIRE(explained.updated_nodes.size() == 1);
  CHECK(explained.updated_nodes[0] == "sum");
  const flowdsl::LaunchReport report = runtime.launch(g, f.stream.get());
  CHECK(report.kind == LaunchKind::updated);
  CHECK(report.nodes_updated == 1);
  CHECK(mismatches(f.result(z), f.sum_of_inputs(2.0f)) == 0);

  SECTION("a smaller count: the elements beyond it are left alone") {
    z.poison();
    sum.set<std::uint64_t>("count", n / 2);
    CHECK(runtime.launch(g, f.stream.get()).kind == LaunchKind::updated);
    const std::vector<float> got = f.result(z);
    const std::vector<float> want = f.sum_of_inputs(3.0f);
    CHECK(mismatches(std::vector<float>(got.begin(), got.begin() + n / 2), std::vector<float>(want.begin(), want.begin() + n / 2)) ==
          0);
    CHECK(std::isnan(got[n / 2]));
    CHECK(std::isnan(got[n - 1]));
  }
  CHECK(runtime.statistics().reinstantiations == 0);
  CHECK(runtime.statistics().misses == 1);
}

TEST_CASE("A graph with a collective relaunched 1000 times", "[nccl][gpu]") {
  Fixture f;
  DeviceBuffer<float> y{n};
  flowdsl::Graph g;
  auto bump = g.kernel("bump", add_one_kernel).launch(blocks, 256).args(n, f.x.get());
  nccl::all_reduce(g, "sum", f.comm, f.x.get(), y.get(), n, ncclFloat32, ncclSum).after(bump);
  flowdsl::Runtime runtime;
  for (int i = 0; i < 1000; ++i) runtime.launch(g, f.stream.get());
  CHECK(mismatches(f.result(y), f.sum_of_inputs(1000.0f)) == 0);
  const flowdsl::RuntimeStatistics s = runtime.statistics();
  CHECK(s.launches == 1000);
  CHECK(s.hits == 999);
  CHECK(s.misses == 1);
}

namespace {

// With several ranks NCCL orders each captured call after the communicator's earlier launches,
// from any graph or stream, through an event wait node and an event record node, unless
// NCCL_GRAPH_MIXING_SUPPORT=0 (read once, when NCCL initialises). CUDA refuses event nodes in
// conditional bodies, so there the build must fail naming the node, and the runtime stay usable.
bool nccl_records_event_nodes(int world) {
  const char* mixing = std::getenv("NCCL_GRAPH_MIXING_SUPPORT");
  return world > 1 && !(mixing != nullptr && std::string(mixing) == "0");
}

void check_refused_in_body(flowdsl::Runtime& runtime, const flowdsl::Graph& g, const Fixture& f, const char* path) {
  CHECK_THROWS_WITH(runtime.launch(g, f.stream.get()), contains(std::string("'") + path + "'") && contains("event") &&
                                                            contains("NCCL_GRAPH_MIXING_SUPPORT=0"));
  // Usable afterwards: a collective outside any body runs.
  DeviceBuffer<float> y{n};
  flowdsl::Graph plain;
  nccl::all_reduce(plain, "sum", f.comm, f.x.get(), y.get(), n, ncclFloat32, ncclSum);
  runtime.launch(plain, f.stream.get());
  CUDA_REQUIRE(cudaStreamSynchronize(f.stream.get()));
  CHECK(mismatches(y.download(), f.sum_of_inputs()) == 0);
}

}  // namespace

TEST_CASE("Collectives run inside WHILE and IF bodies", "[nccl][gpu][conditional]") {
  Fixture f;
  const bool refused = nccl_records_event_nodes(f.world);
  SECTION("a WHILE: double, then all-reduce, three times") {
    DeviceBuffer<float> y{n};
    DeviceBuffer<int> counter{1};
    y.poison();
    flowdsl::Graph g;
    auto zero = g.memset("zero", counter.get(), 0, 1, 4);
    auto loop = g.while_loop("loop", flowdsl::ConditionDefault{1}).after(zero);
    auto twice = loop.body().kernel("double", double_kernel).launch(blocks, 256).args(n, f.x.get());
    auto sum = nccl::all_reduce(loop.body(), "sum", f.comm, f.x.get(), y.get(), n, ncclFloat32, ncclSum).after(twice);
    auto inc = loop.body().kernel("count", increment_kernel).launch(1, 32).args(counter.get()).after(sum);
    loop.body().kernel("decide", keep_below_kernel).launch(1, 32).args(counter.get(), 3, loop.condition()).after(inc);
    flowdsl::Runtime runtime;
    if (refused) {
      check_refused_in_body(runtime, g, f, "loop/sum");
      return;
    }
    runtime.launch(g, f.stream.get());
    std::vector<float> want = f.sum_of_inputs();
    for (float& v : want) v *= 8.0f;
    CHECK(mismatches(f.result(y), want) == 0);
    CHECK(counter.download()[0] == 3);
  }
  SECTION("an IF: the collective runs only when the condition holds") {
    for (const unsigned taken : {1u, 0u}) {
      INFO("condition " << taken);
      DeviceBuffer<float> y{n};
      y.poison();
      flowdsl::Graph g;
      auto gate = g.if_then("gate", flowdsl::ConditionDefault{taken});
      nccl::all_reduce(gate.body(), "sum", f.comm, f.x.get(), y.get(), n, ncclFloat32, ncclSum);
      flowdsl::Runtime runtime;
      if (refused) {
        check_refused_in_body(runtime, g, f, "gate/sum");
        continue;
      }
      runtime.launch(g, f.stream.get());
      const std::vector<float> got = f.result(y);
      if (taken) {
        CHECK(mismatches(got, f.sum_of_inputs()) == 0);
      } else {
        CHECK(std::isnan(got[0]));
        CHECK(std::isnan(got[n - 1]));
      }
    }
  }
}

TEST_CASE("A graph file's collectives bind to its buffers and run", "[nccl][gpu][json]") {
  Fixture f;
  if (flowdsl::KernelRegistry::global().find("nccl.all_gather.f32") == nullptr) {
    nccl::register_calls(flowdsl::KernelRegistry::global());  // the collectives above did, if they ran
  }
  const std::string text = R"({"version": 1, "name": "file",
    "buffers": [{"name": "x", "type": "f32", "count": 4099}, {"name": "y", "type": "f32", "count": {"expr": "4099 * world"}}],
    "nodes": [{"name": "gather", "kind": "library", "call": "nccl.all_gather.f32",
               "args": {"comm": )" + std::to_string(f.comm.id()) +
                           R"(, "count": 4099, "ranks": {"expr": "world"}, "send": "x", "recv": "y"}}]})";
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(text, "file.json", {}, {std::uint64_t(f.rank), std::uint64_t(f.world)});
  DeviceBuffer<float> y{std::size_t(n) * f.world};
  y.poison();
  const flowdsl::BufferAddresses at{{"x", f.x.get()}, {"y", y.get()}};
  flowdsl::Graph g = flowdsl::bind_graph(spec, at, flowdsl::KernelRegistry::global());
  flowdsl::Runtime runtime;
  runtime.launch(g, f.stream.get());
  const std::vector<float> got = f.result(y);
  for (int r = 0; r < f.world; ++r) {
    CHECK(mismatches(std::vector<float>(got.begin() + std::ptrdiff_t(r) * n, got.begin() + std::ptrdiff_t(r + 1) * n), input_of(r),
                     0.0f) == 0);
  }
}

TEST_CASE("A collective that cannot run names its node; the runtime stays usable", "[nccl][gpu][errors]") {
  Fixture f;
  DeviceBuffer<float> y{n};
  flowdsl::Runtime runtime;
  SECTION("a communicator destroyed before the graph was recorded") {
    std::int32_t gone = -1;
    flowdsl::Graph g;
    {
      nccl::Communicator other{nccl::bootstrap_from_environment()};
      gone = other.id();
      nccl::all_reduce(g, "orphan", other, f.x.get(), y.get(), n, ncclFloat32, ncclSum);
    }
    CHECK(nccl::communicator(gone) == nullptr);
    CHECK_THROWS_WITH(runtime.launch(g, f.stream.get()), contains("orphan") && contains("names no NCCL communicator"));
  }
  SECTION("ranks that are not the communicator's size") {
    flowdsl::Graph g;
    auto gather = nccl::all_gather(g, "gather", f.comm, f.x.get(), y.get(), n / (f.world + 1), ncclFloat32);
    gather.set<std::int32_t>("ranks", f.world + 1);
    CHECK_THROWS_WITH(runtime.launch(g, f.stream.get()), contains("gather") && contains("'ranks' is " + std::to_string(f.world + 1)));
  }
  SECTION("a root outside the communicator") {
    flowdsl::Graph g;
    nccl::broadcast(g, "bcast", f.comm, f.x.get(), y.get(), n, ncclFloat32, f.world + 2);
    CHECK_THROWS_WITH(runtime.launch(g, f.stream.get()), contains("bcast") && contains("'root' is " + std::to_string(f.world + 2)));
  }
  // Afterwards a valid graph runs on the same runtime and stream.
  y.poison();
  flowdsl::Graph good;
  nccl::all_reduce(good, "sum", f.comm, f.x.get(), y.get(), n, ncclFloat32, ncclSum);
  runtime.launch(good, f.stream.get());
  CHECK(mismatches(f.result(y), f.sum_of_inputs()) == 0);
}
