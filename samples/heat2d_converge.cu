// SPDX-License-Identifier: Apache-2.0
// 2-D heat diffusion to convergence on a 128 x 96 plate: a WHILE node repeats [two stencil
// steps, the residual norm of the second, the decision] on the device until the residual is at
// most a tolerance, one graph launch per solve. In the same run: the loop a user writes without
// conditional nodes (launch the steps and the residual norm on a stream, copy the residual back,
// wait, test on the host), and the same WHILE built by hand with CUDA's graph API. Every solve's
// iteration count and final field are checked against the host reference; prints the time per
// iteration of each and their ratios.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common.cuh"
#include "eager.cuh"
#include "flowdsl/kernels.hpp"
#include "raw_graph.cuh"
#include "reference.hpp"

namespace fk = flowdsl::kernels;
namespace ref = flowdsl::kernels::reference;

namespace {

constexpr int nx = 128, ny = 96;
constexpr float alpha = 0.2f;       // stable for alpha <= 0.25
constexpr float tolerance = 5e-3f;  // about 1200 iterations from the hot square
constexpr int solves = 9;           // timed solves of each variant, interleaved; medians are printed
constexpr int max_iterations = 1000000;  // the host loop gives up there

/// The host reference: K, the iterations until the residual of an iteration's second step is
/// at most the tolerance (at least one, as a WHILE whose condition starts at 1), and the fields
/// after K - 1, K and K + 1 iterations, to tell the device's count from its neighbours'.
struct Reference {
  int iterations = 0;
  double residual = 0;  // of iteration K
  double margin = 0;    // the least relative distance from the tolerance of the residuals of iterations K - 1 and K
  std::vector<float> fields[3];
};

Reference solve_on_host(const std::vector<float>& initial) {
  Reference r;
  std::vector<float> u = initial, previous;
  double residual = 0, before = 0;
  do {
    previous = u;
    before = residual;
    u = ref::heat2d_step(nx, ny, alpha, ref::heat2d_step(nx, ny, alpha, u, nullptr), &residual);
    ++r.iterations;
  } while (residual > tolerance);
  r.residual = residual;
  r.margin = std::min(1.0 - residual / tolerance, r.iterations > 1 ? before / tolerance - 1.0 : 1.0);
  r.fields[0] = previous;
  r.fields[1] = u;
  r.fields[2] = ref::heat2d_step(nx, ny, alpha, ref::heat2d_step(nx, ny, alpha, u, nullptr), nullptr);
  return r;
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    worst = d == d ? std::max(worst, d) : INFINITY;  // NaN (poison left in place) never passes
  }
  return worst;
}

/// What one solve left on the device, as the host reference sees it.
struct Outcome {
  int iterations = -1;  // K - 1, K or K + 1: the host field the device's matches; -1: none
  double difference = INFINITY;  // from that host field
  double residual = 0;
};

/// Which of K - 1, K and K + 1 iterations the device's field is: the host field it matches to
/// 1e-5 and at least 10 times closer than to the other two.
Outcome outcome_of(const std::vector<float>& field, float residual, const Reference& r) {
  double d[3];
  for (int i = 0; i < 3; ++i) d[i] = max_difference(field, r.fields[i]);
  const int best = static_cast<int>(std::min_element(d, d + 3) - d);
  bool clear = d[best] <= 1e-5;
  for (int i = 0; i < 3; ++i) clear = clear && (i == best || d[i] > 10 * d[best]);
  Outcome o;
  o.difference = d[best];
  o.iterations = clear ? r.iterations - 1 + best : -1;
  o.residual = residual;
  return o;
}

}  // namespace

int main() {
  if (!sample::have_device()) return sample::skipped;
  const std::size_t n = std::size_t(nx) * ny;
  std::vector<float> initial(n, 0.0f);
  for (int i = ny / 4; i < 3 * ny / 4; ++i)
    for (int j = nx / 3; j < 2 * nx / 3; ++j) initial[std::size_t(i) * nx + j] = 1.0f;
  const Reference want = solve_on_host(initial);

  const sample::DeviceArray<float> start = sample::device_copy(initial), u(n), v(n), residual(1);
  const sample::DeviceArray<double> partials(fk::sum_max_partials);
  const sample::PinnedArray<float> host_residual(1);

  // The solve: load the initial field, then WHILE (the condition starts at 1 every launch) the
  // residual of the second step is above the tolerance.
  flowdsl::Graph g;
  auto load = g.memcpy("load", u.get(), start.get(), u.bytes());
  auto solve = g.while_loop("solve", flowdsl::ConditionDefault{1}).after(load);
  auto half = fk::heat2d_stencil(solve.body(), "half", nx, ny, alpha, u.get(), v.get(), partials.get());
  auto full = fk::heat2d_step(solve.body(), "full", nx, ny, alpha, v.get(), u.get(), partials.get(), residual.get());
  full.step.after(half);
  auto decide = fk::condition_greater(solve.body(), "decide", residual.get(), tolerance, solve.condition()).after(full.finish);

  // The same kernels with the same launch shapes, for the host loop and the hand-built WHILE.
  const sample::RawKernel stencil(g, half), finish(g, full.finish), greater(g, decide);
  std::int32_t nx_arg = nx, ny_arg = ny, count = static_cast<std::int32_t>(stencil.grid.x * stencil.grid.y), take_sqrt = 1;
  float alpha_arg = alpha, threshold = tolerance;
  const float *u_in = u.get(), *v_in = v.get(), *residual_in = residual.get();
  float *u_out = u.get(), *v_out = v.get(), *residual_out = residual.get();
  double* partials_out = partials.get();
  const double* partials_in = partials.get();

  bool ok = true;
  try {
    auto stream = flowdsl::make_stream();
    const cudaStream_t s = stream.get();
    flowdsl::Runtime runtime;

    // Raw CUDA: a copy node, then a WHILE node whose body holds the four kernels.
    flowdsl::NativeGraph raw = sample::make_graph();
    cudaGraphNode_t raw_load = nullptr;
    SAMPLE_CHECK(cudaGraphAddMemcpyNode1D(&raw_load, raw.get(), nullptr, 0, u.get(), start.get(), u.bytes(),
                                          cudaMemcpyDeviceToDevice));
    cudaGraphConditionalHandle handle = 0;
    SAMPLE_CHECK(cudaGraphConditionalHandleCreate(&handle, raw.get(), 1, cudaGraphCondAssignDefault));
    std::vector<cudaGraph_t> bodies;
    sample::add_conditional(raw.get(), {raw_load}, handle, cudaGraphCondTypeWhile, 1, bodies);
    flowdsl::Condition raw_condition{handle};
    const cudaGraphNode_t first =
        stencil.add(bodies[0], {}, {&nx_arg, &ny_arg, &alpha_arg, &u_in, &v_out, &partials_out});
    const cudaGraphNode_t second =
        stencil.add(bodies[0], {first}, {&nx_arg, &ny_arg, &alpha_arg, &v_in, &u_out, &partials_out});
    const cudaGraphNode_t norm = finish.add(bodies[0], {second}, {&count, &partials_in, &take_sqrt, &residual_out});
    greater.add(bodies[0], {norm}, {&residual_in, &threshold, &raw_condition});
    const flowdsl::NativeExecutable raw_exec = sample::instantiate(raw.get(), s);

    // The loop without conditional nodes: each iteration's residual comes back to the host.
    auto host_loop = [&]() {
      SAMPLE_CHECK(cudaMemcpyAsync(u.get(), start.get(), u.bytes(), cudaMemcpyDeviceToDevice, s));
      int iterations = 0;
      do {
        stencil.launch(s, {&nx_arg, &ny_arg, &alpha_arg, &u_in, &v_out, &partials_out});
        stencil.launch(s, {&nx_arg, &ny_arg, &alpha_arg, &v_in, &u_out, &partials_out});
        finish.launch(s, {&count, &partials_in, &take_sqrt, &residual_out});
        SAMPLE_CHECK(cudaMemcpyAsync(host_residual.get(), residual.get(), sizeof(float), cudaMemcpyDeviceToHost, s));
        SAMPLE_CHECK(cudaStreamSynchronize(s));
        ++iterations;
      } while (host_residual.get()[0] > tolerance && iterations < max_iterations);
      return iterations;
    };

    auto begin = flowdsl::make_event(), end = flowdsl::make_event();
    struct Variant {
      explicit Variant(const char* name) : label(name) {}
      const char* label;
      std::vector<double> ms;
      Outcome seen;            // the last solve's, or the first one that disagreed with the host
      bool right = true;       // every solve agreed with the host
      double difference = 0;   // the largest from the host field, over the solves
    };
    Variant loop{"host loop (residual read back)"}, flow{"flowdsl WHILE (one launch per solve)"},
        hand{"raw CUDA WHILE (one launch per solve)"};
    int counted = 0;  // the host loop's own count, last solve
    // One solve, timed with events; the fields are poisoned first, so a solve must write them.
    auto run = [&](Variant& variant, auto&& solve_once, bool timed) {
      SAMPLE_CHECK(cudaMemsetAsync(u.get(), 0xff, u.bytes(), s));
      SAMPLE_CHECK(cudaMemsetAsync(v.get(), 0xff, v.bytes(), s));
      SAMPLE_CHECK(cudaMemsetAsync(residual.get(), 0xff, residual.bytes(), s));
      SAMPLE_CHECK(cudaEventRecord(begin.get(), s));
      solve_once();
      SAMPLE_CHECK(cudaEventRecord(end.get(), s));
      SAMPLE_CHECK(cudaEventSynchronize(end.get()));
      SAMPLE_CHECK(cudaGetLastError());
      float ms = 0;
      SAMPLE_CHECK(cudaEventElapsedTime(&ms, begin.get(), end.get()));
      if (timed) variant.ms.push_back(ms);
      std::vector<float> field(n);
      float last = 0;
      SAMPLE_CHECK(cudaMemcpy(field.data(), u.get(), u.bytes(), cudaMemcpyDeviceToHost));
      SAMPLE_CHECK(cudaMemcpy(&last, residual.get(), sizeof last, cudaMemcpyDeviceToHost));
      const Outcome o = outcome_of(field, last, want);
      const bool right = o.iterations == want.iterations && std::fabs(o.residual - want.residual) <= 1e-4 * want.residual;
      if (variant.right) variant.seen = o;
      variant.right = variant.right && right;
      variant.difference = std::max(variant.difference, o.difference);
    };
    for (int round = 0; round <= solves; ++round) {  // round 0 warms up
      run(loop, [&] { counted = host_loop(); }, round > 0);
      loop.right = loop.right && counted == want.iterations;
      run(flow, [&] { runtime.launch(g, s); }, round > 0);
      run(hand, [&] { SAMPLE_CHECK(cudaGraphLaunch(raw_exec.get(), s)); }, round > 0);
    }

    const flowdsl::RuntimeStatistics st = runtime.statistics();
    std::printf("heat2d_converge: %d x %d plate, alpha %.2f, tolerance %.1e; median of %d solves each\n", nx, ny, alpha,
                tolerance, solves);
    std::printf("host reference: %d iterations, last residual %.4e (the residuals of the last two iterations lie %.1e "
                "or more from the tolerance, relative)\n",
                want.iterations, want.residual, want.margin);
    std::printf("%-40s %10s %18s %14s %22s\n", "", "iterations", "us per iteration", "ms per solve", "field vs host (max)");
    for (const Variant* var : {&loop, &flow, &hand}) {
      const double ms = sample::median(var->ms);
      std::printf("%-40s %10d %18.2f %14.3f %22.2e\n", var->label, var->seen.iterations, 1e3 * ms / want.iterations, ms,
                  var->difference);
      if (!var->right) std::printf("  %s: a solve ended after %d iterations (-1: no host field matches) with residual %.4e\n",
                                   var->label, var->seen.iterations, var->seen.residual);
      ok = ok && var->right;
    }
    const double loop_ms = sample::median(loop.ms), flow_ms = sample::median(flow.ms), hand_ms = sample::median(hand.ms);
    std::printf("host loop / flowdsl WHILE: %.2f (goal >= 2)\n", loop_ms / flow_ms);
    std::printf("flowdsl WHILE / raw WHILE: %.3f (goal <= 1.05)\n", flow_ms / hand_ms);
    std::printf("host loop counted %d iterations; cache: launches=%llu misses=%llu node_updates=%llu\n", counted,
                static_cast<unsigned long long>(st.launches), static_cast<unsigned long long>(st.misses),
                static_cast<unsigned long long>(st.node_updates));
    if (st.misses != 1 || st.reinstantiations != 0) {
      std::printf("expected one instantiation and hits after it\n");
      ok = false;
    }
  } catch (const flowdsl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf(ok ? "heat2d_converge: matches reference\n" : "heat2d_converge: DOES NOT match reference\n");
  return ok ? 0 : 1;
}
