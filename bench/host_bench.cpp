// SPDX-License-Identifier: Apache-2.0
// Host-only benchmark: declare, validate + plan + hash per node at 100k nodes, with and without
// Graph::reserve. Needs no GPU.
// `--quick` runs a small size (used as a ctest smoke test; no timing is asserted).
// `--sizes` times the same at 1000, 10 000 and 100 000 nodes (width 1).
// `--nodes N [--reps R]` times flowdsl::lower() alone on graphs of N nodes declared once (widths 1
// and 8): the median and the fastest of R lowerings (default: as many as take about a second).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench_util.hpp"
#include "flowdsl/flowdsl.hpp"

namespace {

void tiny(float*, float) {}  // stands in for a kernel: the description stores only its address
float slot[8];

// Node names as a caller would make them; the bench's declare figures include this.
std::string node_name(int i) { return "k" + std::to_string(i); }

flowdsl::Graph make_graph(int n, int width, bool reserve) {
  flowdsl::Graph g;
  if (reserve) g.reserve(static_cast<std::size_t>(n), static_cast<std::size_t>(n));
  std::vector<flowdsl::KernelNode<float*, float>> nodes;
  nodes.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    nodes.push_back(g.kernel(node_name(i), tiny).grid(1).block(32).args(slot + i % width, 1.0f));
    if (i >= width) nodes.back().after(nodes[static_cast<std::size_t>(i - width)]);
  }
  return g;
}

// lower() alone, again and again on one description: what a Graph's first plan() costs after
// its declaration.
int time_lowering(int n, int reps) {
  std::printf("lower() alone, %d nodes\n", n);
  std::printf("%-8s %8s %16s %16s\n", "width", "reps", "median us/node", "fastest us/node");
  for (int width : {1, 8}) {
    const flowdsl::Graph g = make_graph(n, width, true);
    const flowdsl::Description& d = g.description();
    int runs = reps;
    if (runs <= 0) {  // about a second's worth
      const double t0 = bench::now_us();
      (void)flowdsl::lower(d);
      runs = std::max(5, static_cast<int>(1e6 / std::max(1.0, bench::now_us() - t0)));
    }
    std::vector<double> times;
    times.reserve(static_cast<std::size_t>(runs));
    std::uint64_t hashes = 0;
    for (int r = 0; r < runs; ++r) {
      const double t0 = bench::now_us();
      hashes ^= flowdsl::lower(d).topology_hash;
      times.push_back((bench::now_us() - t0) / n);
    }
    if (hashes == 0 && runs % 2 == 1) std::printf("(zero hash)\n");
    std::printf("%-8d %8d %16.4f %16.4f\n", width, runs, bench::median(times),
                *std::min_element(times.begin(), times.end()));
  }
  return 0;
}

// Medians over `reps` graphs of `n` nodes, µs a node: declaring; validating, planning and
// hashing (the first topology_hash()); both.
struct BuildFigures {
  double declare, plan, total;
};

BuildFigures time_builds(int n, int width, bool reserve, int reps) {
  std::vector<double> build, lower, total;
  for (int r = 0; r < reps; ++r) {
    const double t0 = bench::now_us();
    flowdsl::Graph g = make_graph(n, width, reserve);
    const double t1 = bench::now_us();
    const std::uint64_t hash = g.topology_hash();
    const double t2 = bench::now_us();
    if (hash == 0) std::printf("(zero hash)\n");
    build.push_back((t1 - t0) / n);
    lower.push_back((t2 - t1) / n);
    total.push_back((t2 - t0) / n);
  }
  return {bench::median(build), bench::median(lower), bench::median(total)};
}

// Declaring and planning per node at sizes from cache-resident (1000 nodes: about 0.4 MB of
// description) to well past the caches (100 000: about 40 MB): whether a machine's figure at 100k
// is set by its memory or by its instructions.
int time_sizes() {
  std::printf("declare + validate + plan + hash by graph size, width 1, reserved (median of the runs)\n");
  std::printf("%-8s %6s %16s %27s %10s\n", "nodes", "runs", "declare us/node", "validate+plan+hash us/node", "total");
  for (int n : {1000, 10000, 100000}) {
    const int reps = std::max(7, 2000000 / n);
    const BuildFigures f = time_builds(n, 1, true, reps);
    std::printf("%-8d %6d %16.3f %27.3f %10.3f\n", n, reps, f.declare, f.plan, f.total);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "--nodes") == 0) {
    const int reps = argc > 4 && std::strcmp(argv[3], "--reps") == 0 ? std::atoi(argv[4]) : 0;
    return time_lowering(std::max(1, std::atoi(argv[2])), reps);
  }
  if (argc > 1 && std::strcmp(argv[1], "--sizes") == 0) return time_sizes();
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int n = quick ? 2000 : 100000;
  const int reps = quick ? 3 : 7;
  std::printf("host-only figures, %d nodes, median of %d\n", n, reps);
  std::printf("%-8s %-9s %14s %27s %10s\n", "width", "reserved", "declare us/node", "validate+plan+hash us/node",
              "total");
  for (int width : {1, 8}) {
    for (bool reserve : {false, true}) {
      const BuildFigures f = time_builds(n, width, reserve, reps);
      std::printf("%-8d %-9s %14.3f %27.3f %10.3f\n", width, reserve ? "yes" : "no", f.declare, f.plan, f.total);
    }
  }
  // What the caller's own code costs of the declare figures: making the names alone.
  std::vector<double> naming;
  for (int r = 0; r < reps; ++r) {
    std::vector<std::string> names;
    names.reserve(static_cast<std::size_t>(n));
    const double t0 = bench::now_us();
    for (int i = 0; i < n; ++i) names.push_back(node_name(i));
    naming.push_back((bench::now_us() - t0) / n);
  }
  std::printf("of the declare figures, the caller's names alone (\"k\" + std::to_string(i)): %.3f us/node\n",
              bench::median(naming));
  return 0;
}
