// SPDX-License-Identifier: Apache-2.0
// Host-only benchmark of the runtime's own work, on a backend whose executables do nothing (no
// GPU needed): a hit, one update and a launch, a rebuilt Graph compared by value, and 8 threads
// launching on their own streams through one Runtime. What flowdsl adds to the CUDA calls.
// `--quick` runs few repeats (used as a ctest smoke test; no timing is asserted).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "flowdsl/flowdsl.hpp"

namespace {

void tiny(float*, float) {}  // stands in for a kernel: nothing runs
float slot[32];

class NopExecutable final : public flowdsl::Executable {
 public:
  std::optional<std::string> update(const flowdsl::Description&, const flowdsl::Plan&, flowdsl::NodeId) override {
    return std::nullopt;
  }
  void launch(cudaStream_t) override {}
  void mark_end(cudaStream_t) override {}
  bool ended() const override { return true; }  // nothing runs: every launch has ended
};

class NopBackend final : public flowdsl::Backend {
 public:
  std::unique_ptr<flowdsl::Executable> instantiate(const flowdsl::Description&, const flowdsl::Plan&,
                                                   cudaStream_t) override {
    return std::make_unique<NopExecutable>();
  }
};

flowdsl::Runtime nop_runtime() { return flowdsl::Runtime(flowdsl::RuntimeOptions{}, std::make_unique<NopBackend>()); }

/// A chain of `n` nodes; every tenth adds `changed`, the others 1.
flowdsl::Graph chain(int n, float changed = 1.0f) {
  flowdsl::Graph g;
  flowdsl::NodeHandle prev(nullptr, 0);
  for (int i = 0; i < n; ++i) {
    auto k = g.kernel("k" + std::to_string(i), tiny).grid(1).block(32).args(slot, i % 10 == 0 ? changed : 1.0f);
    if (i > 0) k.after(prev);
    prev = k;
  }
  return g;
}

cudaStream_t stream(std::uintptr_t n) { return reinterpret_cast<cudaStream_t>(0x1000 + n); }

/// Median over `reps` of the time per call of `calls` calls of `f`, in ns.
template <class F>
double ns_per_call(int reps, int calls, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = bench::now_us();
    for (int i = 0; i < calls; ++i) f(i);
    t.push_back(1000.0 * (bench::now_us() - t0) / calls);
  }
  return bench::median(t);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 3 : 15;
  const int calls = quick ? 2000 : 200000;
  std::printf("the runtime's own work per launch, on a backend that does nothing (ns, median of %d)\n", reps);

  // A hit costs the same whatever the graph's size: nothing in it walks the nodes.
  for (const int n : {1000, 10000}) {
    auto rt = nop_runtime();
    const flowdsl::Graph g = chain(n);
    rt.launch(g, stream(0));
    const std::string name = "hit, " + std::to_string(n) + "-node chain";
    std::printf("%-52s %10.1f\n", name.c_str(), ns_per_call(reps, calls, [&](int) { rt.launch(g, stream(0)); }));
  }
  {
    auto rt = nop_runtime();
    flowdsl::Graph g;
    std::vector<flowdsl::KernelNode<float*, float>> nodes;
    for (int i = 0; i < 10; ++i) {
      nodes.push_back(g.kernel("k" + std::to_string(i), tiny).grid(1).block(32).args(slot, 1.0f));
      if (i > 0) nodes.back().after(nodes[static_cast<std::size_t>(i - 1)]);
    }
    rt.launch(g, stream(0));
    std::printf("%-52s %10.1f\n", "hit, 10-node chain", ns_per_call(reps, calls, [&](int) { rt.launch(g, stream(0)); }));
    std::printf("%-52s %10.1f\n", "one argument changed + launch",
                ns_per_call(reps, calls, [&](int i) {
                  nodes[3].arg<1>(static_cast<float>(i & 7));
                  rt.launch(g, stream(0));
                }));
  }
  {
    // A hit right after the core's caches were emptied, as a launch that follows a
    // synchronisation may find them: every line the runtime touches (code and data) is then a
    // miss to the L3, and the figure counts them (less the clock's own cost, timed the same way
    // around nothing).
    auto rt = nop_runtime();
    const flowdsl::Graph g = chain(10);
    rt.launch(g, stream(0));
    std::vector<unsigned char> evict(std::size_t{4} << 20);  // past a core's L2 (1-2 MiB on our machines), not the L3
    const int rounds = quick ? 20 : 3000;
    std::vector<double> launch, nothing;
    for (int i = 0; i < rounds; ++i) {
      for (int pass = 0; pass < 2; ++pass) {
        for (std::size_t j = 0; j < evict.size(); j += 64) evict[j] = static_cast<unsigned char>(evict[j] + 1);
        const double t0 = bench::now_us();
        if (pass == 0) rt.launch(g, stream(0));
        const double t1 = bench::now_us();
        (pass == 0 ? launch : nothing).push_back(1000.0 * (t1 - t0));
      }
    }
    // The clock ticks in steps of up to tens of ns on some hosts: the mean of the middle 80%.
    const auto central_mean = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      double sum = 0.0;
      const std::size_t from = v.size() / 10, to = v.size() - v.size() / 10;
      for (std::size_t k = from; k < to; ++k) sum += v[k];
      return sum / static_cast<double>(to - from);
    };
    std::printf("%-52s %10.1f  (the clock alone: %.1f)\n", "hit after the caches were emptied, 10-node chain",
                central_mean(launch) - central_mean(nothing), central_mean(nothing));
  }
  {
    // A 1000-node chain rebuilt for every launch with every tenth node changed, as a request
    // handler does: declared, planned, launched (1000 nodes compared, 100 updated; the backend's
    // updates cost nothing here).
    auto rt = nop_runtime();
    rt.launch(chain(1000), stream(0));
    const int rebuilds = quick ? 10 : 200;
    std::vector<double> declare, plan, launch;
    std::size_t updated = 0;
    for (int i = 0; i < rebuilds; ++i) {
      const double t0 = bench::now_us();
      flowdsl::Graph g = chain(1000, i % 2 == 0 ? 2.0f : 3.0f);
      const double t1 = bench::now_us();
      (void)g.plan();
      const double t2 = bench::now_us();
      updated += rt.launch(g, stream(0)).nodes_updated;
      const double t3 = bench::now_us();
      declare.push_back(1000.0 * (t1 - t0));
      plan.push_back(1000.0 * (t2 - t1));
      launch.push_back(1000.0 * (t3 - t2));
    }
    std::printf("%-52s %10.1f  (%zu nodes updated per launch)\n", "rebuilt 1000-node chain, 100 differ: launch",
                bench::median(launch), updated / static_cast<std::size_t>(rebuilds));
    std::printf("%-52s %10.1f\n", "  for reference: declare the 1000 nodes", bench::median(declare));
    std::printf("%-52s %10.1f\n", "  for reference: validate + lower them", bench::median(plan));
  }
  {
    // The first launch of a new topology of 1000 nodes, planned beforehand: what the runtime adds
    // to the backend's instantiation (which costs nothing here). A fresh Runtime each time.
    const flowdsl::Graph g = chain(1000);
    (void)g.plan();
    const int misses = quick ? 10 : 200;
    std::vector<double> miss;
    for (int i = 0; i < misses; ++i) {
      auto rt = nop_runtime();
      const double t0 = bench::now_us();
      rt.launch(g, stream(0));
      miss.push_back(1000.0 * (bench::now_us() - t0));
    }
    std::printf("%-52s %10.1f\n", "first launch (miss) of a planned 1000-node chain", bench::median(miss));
  }
  {
    // 8 threads, each its own stream and Graph of one topology: the runtime's throughput.
    auto rt = nop_runtime();
    constexpr int lanes = 8;
    const int launches = quick ? 1000 : 100000;
    std::vector<flowdsl::Graph> graphs;
    for (int t = 0; t < lanes; ++t) {
      graphs.push_back(chain(10));
      rt.launch(graphs.back(), stream(static_cast<std::uintptr_t>(t)));
    }
    std::atomic<bool> go{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < lanes; ++t) {
      workers.emplace_back([&, t] {
        while (!go.load()) {
        }
        for (int i = 0; i < launches; ++i) rt.launch(graphs[static_cast<std::size_t>(t)], stream(static_cast<std::uintptr_t>(t)));
      });
    }
    const double t0 = bench::now_us();
    go = true;
    for (auto& w : workers) w.join();
    const double wall = bench::now_us() - t0;
    std::printf("%-52s %10.1f  (%zu executables)\n", "8 threads on their own streams: wall per launch",
                1000.0 * wall / (lanes * launches), rt.size());
  }
  return 0;
}
