// SPDX-License-Identifier: Apache-2.0
// 2-D heat diffusion: a hot square spreading on a cold plate with fixed boundary. A graph of
// 2 x 25 stencil steps (ping-pong between two fields, a residual norm after each) replayed
// 8 times = 400 steps, against the same kernels launched one by one on a stream. The final
// field (float steps vs double-rounded host steps: within 1e-4) and every residual (1e-2)
// are checked against the host reference; the residual must fall.
#include <cmath>
#include <cstring>
#include <vector>

#include "common.cuh"
#include "eager.cuh"
#include "flowdsl/kernels.hpp"
#include "reference.hpp"

namespace fk = flowdsl::kernels;
namespace ref = flowdsl::kernels::reference;

namespace {
constexpr int nx = 1024, ny = 768, pairs = 25, replays = 8;
constexpr float alpha = 0.2f;  // stable for alpha <= 0.25
constexpr int steps_per_graph = 2 * pairs;
}  // namespace

int main() {
  if (!sample::have_device()) return sample::skipped;
  const std::size_t n = std::size_t(nx) * ny;
  std::vector<float> initial(n, 0.0f);
  for (int i = ny / 4; i < 3 * ny / 4; ++i)
    for (int j = nx / 3; j < 2 * nx / 3; ++j) initial[std::size_t(i) * nx + j] = 1.0f;

  const sample::DeviceArray<float> u(n), v(n), residuals(steps_per_graph);
  const sample::DeviceArray<double> partials(std::size_t(steps_per_graph) * fk::sum_max_partials);

  flowdsl::Graph g;
  flowdsl::NodeHandle last = g.empty("start");
  for (int s = 0; s < steps_per_graph; ++s) {
    const float* from = (s % 2 ? v : u).get();
    float* to = (s % 2 ? u : v).get();
    // Each step has its own partials, so that its residual can finish while the next step runs.
    fk::Heat2dNodes nodes = fk::heat2d_step(g, "heat" + std::to_string(s), nx, ny, alpha, from, to,
                                            partials.get() + std::size_t(s) * fk::sum_max_partials, residuals.get() + s);
    nodes.step.after(last);
    last = nodes.step;
  }

  // Host reference: all the steps, with the residual of each.
  std::vector<float> want = initial;
  std::vector<double> want_residual(steps_per_graph * replays);
  for (int s = 0; s < steps_per_graph * replays; ++s) want = ref::heat2d_step(nx, ny, alpha, want, &want_residual[s]);

  bool ok = true;
  try {
    auto stream = flowdsl::make_stream();
    flowdsl::Runtime runtime;
    auto start = flowdsl::make_event(), stop = flowdsl::make_event();
    std::vector<float> got_residual(steps_per_graph * replays);
    // Runs all the steps with `launch`, timing them with events; residuals copied per replay.
    auto run = [&](auto&& launch) {
      sample::upload(u, initial);
      float total_ms = 0;
      for (int r = 0; r < replays; ++r) {
        SAMPLE_CHECK(cudaEventRecord(start.get(), stream.get()));
        launch();
        SAMPLE_CHECK(cudaEventRecord(stop.get(), stream.get()));
        SAMPLE_CHECK(cudaEventSynchronize(stop.get()));
        float ms = 0;
        SAMPLE_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
        total_ms += ms;
        SAMPLE_CHECK(cudaMemcpy(got_residual.data() + r * steps_per_graph, residuals.get(), residuals.bytes(),
                                cudaMemcpyDeviceToHost));
      }
      return total_ms;
    };
    auto graph = [&] { runtime.launch(g, stream.get()); };
    auto one_by_one = [&] { flowdsl::launch_eagerly(g, stream.get()); };
    run(graph);  // warm-up
    const float stream_ms = run(one_by_one);
    // The same graph with its kernel-to-kernel edges programmatic (another topology): its field
    // and residuals must be the plain graph's, byte for byte.
    g.programmatic_edges(true);
    run(graph);  // warm-up: instantiation
    const float early_ms = run(graph);
    std::vector<float> early_field(n), early_residual = got_residual;
    SAMPLE_CHECK(cudaMemcpy(early_field.data(), u.get(), u.bytes(), cudaMemcpyDeviceToHost));
    g.programmatic_edges(false);
    const float graph_ms = run(graph);

    std::vector<float> got(n);
    SAMPLE_CHECK(cudaMemcpy(got.data(), u.get(), u.bytes(), cudaMemcpyDeviceToHost));  // even step count: ends in u
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, double(std::fabs(got[i] - want[i])));
    std::size_t bad_residuals = 0;
    for (int s = 0; s < steps_per_graph * replays; ++s) {
      bad_residuals += !(std::fabs(got_residual[s] - want_residual[s]) <= 1e-2 * want_residual[s] + 1e-6);
    }
    const bool falling = want_residual.back() < want_residual.front() && got_residual.back() < got_residual.front();
    std::printf("heat2d: %d x %d, %d steps; largest difference from the host field %.2e; residual %.4e -> %.4e (host %.4e)\n",
                nx, ny, steps_per_graph * replays, worst, got_residual.front(), got_residual.back(), want_residual.back());
    const bool same_early = std::memcmp(early_field.data(), got.data(), u.bytes()) == 0 &&
                            std::memcmp(early_residual.data(), got_residual.data(), got_residual.size() * sizeof(float)) == 0;
    if (!same_early) std::printf("the graph with programmatic edges computed other bytes than the plain graph\n");
    ok = worst <= 1e-4 && bad_residuals == 0 && falling && same_early;
    if (bad_residuals) std::printf("%zu residuals differ from the host by more than 1e-2 relative\n", bad_residuals);
    std::printf("%-30s %10s %14s\n", "", "GPU ms", "us per step");
    std::printf("%-30s %10.3f %14.2f\n", "graph replay", graph_ms, 1e3 * graph_ms / (steps_per_graph * replays));
    std::printf("%-30s %10.3f %14.2f\n", "  with programmatic edges", early_ms, 1e3 * early_ms / (steps_per_graph * replays));
    std::printf("%-30s %10.3f %14.2f\n", "kernels one by one (stream)", stream_ms, 1e3 * stream_ms / (steps_per_graph * replays));
    std::printf("ratio stream / graph: %.2f\n", stream_ms / graph_ms);
    std::printf("programmatic edges: graph / graph with programmatic edges: %.2f\n", graph_ms / early_ms);
  } catch (const flowdsl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf(ok ? "heat2d: matches reference\n" : "heat2d: DOES NOT match reference\n");
  return ok ? 0 : 1;
}
