// NCCL collectives in graphs on one GPU with one rank: NCCL makes most of them copies there (avg
// on floats runs its PreMulSum kernel), so these tests prove the plumbing: recording into the
// graph, results against host references on random data, arguments updated in place, a graph
// relaunched 1000 times, collectives inside WHILE and IF bodies, graph files, errors naming the
// node with the runtime usable afterwards. The real collectives run on two GPUs (bench/nccl/).
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

struct Fixture {
  nccl::Communicator comm = nccl::Communicator::single(0);
  flowdsl::StreamHandle stream = flowdsl::make_stream();
  std::vector<float> host_x = random_floats(n, 29);
  DeviceBuffer<float> x{n};

  Fixture() { x.upload(host_x); }
  std::vector<float> result(const DeviceBuffer<float>& out) {
    CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
    CUDA_REQUIRE(cudaGetLastError());
    return out.download();
  }
};

std::vector<float> plus(const std::vector<float>& x, float c) {
  std::vector<float> y(x);
  for (float& v : y) v += c;
  return y;
}

}  // namespace

TEST_CASE("Every collective of one rank computes its result inside a graph", "[nccl][gpu]") {
  Fixture f;
  CHECK(f.comm.rank() == 0);
  CHECK(f.comm.size() == 1);
  CHECK(nccl::library_version() >= 21900);
  DeviceBuffer<float> reduced{n}, averaged{n}, gathered{n}, scattered{n}, broadcast{n}, exchanged{n};
  for (DeviceBuffer<float>* b : {&reduced, &averaged, &gathered, &scattered, &broadcast, &exchanged}) b->poison();

  flowdsl::Graph g;
  auto sum = nccl::all_reduce(g, "sum", f.comm, f.x.get(), reduced.get(), n, ncclFloat32, ncclSum);
  auto avg = nccl::all_reduce(g, "avg", f.comm, reduced.get(), averaged.get(), n, ncclFloat32, ncclAvg).after(sum);
  auto gather = nccl::all_gather(g, "gather", f.comm, averaged.get(), gathered.get(), n, ncclFloat32).after(avg);
  auto scatter =
      nccl::reduce_scatter(g, "scatter", f.comm, gathered.get(), scattered.get(), n, ncclFloat32, ncclMax).after(gather);
  auto bcast = nccl::broadcast(g, "bcast", f.comm, scattered.get(), broadcast.get(), n, ncclFloat32, 0).after(scatter);
  nccl::send_recv(g, "exchange", f.comm, broadcast.get(), 0, exchanged.get(), 0, n, ncclFloat32).after(bcast);

  flowdsl::Runtime runtime;
  CHECK(runtime.launch(g, f.stream.get()).kind == LaunchKind::instantiated);
  for (DeviceBuffer<float>* b : {&reduced, &averaged, &gathered, &scattered, &broadcast, &exchanged}) {
    CHECK(mismatches(f.result(*b), f.host_x, 0.0f) == 0);
  }
  SECTION("a launch with nothing changed is a hit and computes the same") {
    exchanged.poison();
    CHECK(runtime.launch(g, f.stream.get()).kind == LaunchKind::hit);
    CHECK(mismatches(f.result(exchanged), f.host_x, 0.0f) == 0);
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
  CHECK(mismatches(f.result(y), plus(f.host_x, 1.0f), 0.0f) == 0);

  z.poison();
  sum.set<float*>("recv", z.get());
  const flowdsl::LaunchExplanation explained = runtime.explain(g, f.stream.get());
  CHECK(explained.kind == LaunchKind::updated);
  REQUIRE(explained.updated_nodes.size() == 1);
  CHECK(explained.updated_nodes[0] == "sum");
  const flowdsl::LaunchReport report = runtime.launch(g, f.stream.get());
  CHECK(report.kind == LaunchKind::updated);
  CHECK(report.nodes_updated == 1);
  CHECK(mismatches(f.result(z), plus(f.host_x, 2.0f), 0.0f) == 0);

  SECTION("a smaller count: the elements beyond it are left alone") {
    z.poison();
    sum.set<std::uint64_t>("count", n / 2);
    CHECK(runtime.launch(g, f.stream.get()).kind == LaunchKind::updated);
    const std::vector<float> got = f.result(z);
    const std::vector<float> want = plus(f.host_x, 3.0f);
    CHECK(mismatches(std::vector<float>(got.begin(), got.begin() + n / 2), std::vector<float>(want.begin(), want.begin() + n / 2),
                     0.0f) == 0);
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
  CHECK(mismatches(f.result(y), plus(f.host_x, 1000.0f)) == 0);
  const flowdsl::RuntimeStatistics s = runtime.statistics();
  CHECK(s.launches == 1000);
  CHECK(s.hits == 999);
  CHECK(s.misses == 1);
}

TEST_CASE("Collectives run inside WHILE and IF bodies", "[nccl][gpu][conditional]") {
  Fixture f;
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
    runtime.launch(g, f.stream.get());
    std::vector<float> want(f.host_x);
    for (float& v : want) v *= 8.0f;
    CHECK(mismatches(f.result(y), want, 0.0f) == 0);
    CHECK(counter.download()[0] == 3);
  }
  SECTION("an IF: the collective runs only when the condition holds") {
    for (const unsigned taken : {1u, 0u}) {
      INFO("condition " << taken);
      DeviceBuffer<float> y{n};
      y.poison();
      flowdsl::Graph g;
      auto gate = g.if_then("gate", flowdsl::ConditionDefault{taken});
      nccl::all_reduce(gate.body(), "avg", f.comm, f.x.get(), y.get(), n, ncclFloat32, ncclAvg);
      flowdsl::Runtime runtime;
      runtime.launch(g, f.stream.get());
      const std::vector<float> got = f.result(y);
      if (taken) {
        CHECK(mismatches(got, f.host_x, 0.0f) == 0);
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
  const flowdsl::GraphSpec spec = flowdsl::parse_graph(text, "file.json", {}, {0, 1});
  DeviceBuffer<float> y{n};
  y.poison();
  const flowdsl::BufferAddresses at{{"x", f.x.get()}, {"y", y.get()}};
  flowdsl::Graph g = flowdsl::bind_graph(spec, at, flowdsl::KernelRegistry::global());
  flowdsl::Runtime runtime;
  runtime.launch(g, f.stream.get());
  CHECK(mismatches(f.result(y), f.host_x, 0.0f) == 0);
}

TEST_CASE("A collective that cannot run names its node; the runtime stays usable", "[nccl][gpu][errors]") {
  Fixture f;
  DeviceBuffer<float> y{n};
  flowdsl::Runtime runtime;
  SECTION("a communicator destroyed before the graph was recorded") {
    std::int32_t gone = -1;
    flowdsl::Graph g;
    {
      nccl::Communicator other = nccl::Communicator::single(0);
      gone = other.id();
      nccl::all_reduce(g, "orphan", other, f.x.get(), y.get(), n, ncclFloat32, ncclSum);
    }
    CHECK(nccl::communicator(gone) == nullptr);
    CHECK_THROWS_WITH(runtime.launch(g, f.stream.get()), contains("orphan") && contains("names no NCCL communicator"));
  }
  SECTION("ranks that are not the communicator's size") {
    flowdsl::Graph g;
    auto gather = nccl::all_gather(g, "gather", f.comm, f.x.get(), y.get(), n / 2, ncclFloat32);
    gather.set<std::int32_t>("ranks", 2);
    CHECK_THROWS_WITH(runtime.launch(g, f.stream.get()), contains("gather") && contains("'ranks' is 2"));
  }
  SECTION("a root outside the communicator") {
    flowdsl::Graph g;
    nccl::broadcast(g, "bcast", f.comm, f.x.get(), y.get(), n, ncclFloat32, 3);
    CHECK_THROWS_WITH(runtime.launch(g, f.stream.get()), contains("bcast") && contains("'root' is 3"));
  }
  // Afterwards a valid graph runs on the same runtime and stream.
  y.poison();
  flowdsl::Graph good;
  nccl::all_reduce(good, "sum", f.comm, f.x.get(), y.get(), n, ncclFloat32, ncclSum);
  runtime.launch(good, f.stream.get());
  CHECK(mismatches(f.result(y), f.host_x, 0.0f) == 0);
}
