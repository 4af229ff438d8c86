// SPDX-License-Identifier: Apache-2.0
// One million CartPole environments stepped 1000 times: a graph of 50 (policy, step) pairs
// replayed 20 times, against the same kernels launched one by one on a stream. Both runs
// must end in the same state bit for bit; the last step is checked against the host
// reference for every environment, and every step must have paid reward 1.
#include <cmath>
#include <cstdint>
#include <vector>

#include "common.cuh"
#include "eager.cuh"
#include "flowdsl/kernels.hpp"
#include "reference.hpp"

namespace fk = flowdsl::kernels;
namespace ref = flowdsl::kernels::reference;

namespace {
constexpr int envs = 1 << 20, steps_per_graph = 50, replays = 20, max_steps = 500;
constexpr std::uint64_t seed = 2026;

/// A fixed linear policy: push towards where the pole is falling.
__global__ void policy_kernel(int n, const float* state, int* action) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e < n) action[e] = state[2 * n + e] + 0.5f * state[3 * n + e] + 0.01f * state[n + e] > 0.0f ? 1 : 0;
}

/// The environments' device buffers (state: x, x_dot, theta, theta_dot, each `envs` long).
struct Buffers {
  sample::DeviceArray<float> state{4 * std::size_t(envs)}, reward{envs};
  sample::DeviceArray<std::int32_t> action{envs}, steps{envs}, episodes{envs};
  sample::DeviceArray<std::uint8_t> done{envs};
};

/// A chain of `pairs` (policy, step) pairs.
void build(flowdsl::Graph& g, const Buffers& b, int pairs) {
  flowdsl::NodeHandle last = g.empty("start");
  for (int s = 0; s < pairs; ++s) {
    auto p = g.kernel("policy" + std::to_string(s), policy_kernel, "policy")
                 .launch((envs + 255) / 256, 256)
                 .args(envs, static_cast<const float*>(b.state.get()), b.action.get())
                 .after(last);
    last = fk::cartpole_step(g, "step" + std::to_string(s), envs, seed, max_steps, b.action.get(), b.state.get(),
                             b.reward.get(), b.steps.get(), b.episodes.get(), b.done.get())
               .after(p);
  }
}

template <class T>
std::vector<T> download(const sample::DeviceArray<T>& device) {
  std::vector<T> out(device.size());
  SAMPLE_CHECK(cudaMemcpy(out.data(), device.get(), device.bytes(), cudaMemcpyDeviceToHost));
  return out;
}
}  // namespace

int main() {
  if (!sample::have_device()) return sample::skipped;
  const Buffers b;

  flowdsl::Graph reset, steps, one_step;
  fk::cartpole_reset(reset, "reset", envs, seed, b.state.get(), b.reward.get(), b.steps.get(), b.episodes.get(),
                     b.done.get());
  build(steps, b, steps_per_graph);
  build(one_step, b, 1);

  bool ok = true;
  try {
    auto stream = flowdsl::make_stream();
    flowdsl::Runtime runtime;
    auto event_start = flowdsl::make_event(), event_stop = flowdsl::make_event();
    // Times `run` (which enqueues all 1000 steps) with events, after a reset.
    auto timed = [&](auto&& run) {
      runtime.launch(reset, stream.get());
      SAMPLE_CHECK(cudaEventRecord(event_start.get(), stream.get()));
      run();
      SAMPLE_CHECK(cudaEventRecord(event_stop.get(), stream.get()));
      SAMPLE_CHECK(cudaEventSynchronize(event_stop.get()));
      float ms = 0;
      SAMPLE_CHECK(cudaEventElapsedTime(&ms, event_start.get(), event_stop.get()));
      return ms;
    };
    auto graph_run = [&] {
      for (int r = 0; r < replays; ++r) runtime.launch(steps, stream.get());
    };
    auto stream_run = [&] {
      for (int r = 0; r < replays; ++r) flowdsl::launch_eagerly(steps, stream.get());
    };
    graph_run();  // warm-up: instantiation and module load out of the timing
    stream_run();
    SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));

    const float stream_ms = timed(stream_run);
    const std::vector<float> stream_state = download(b.state);
    const std::vector<std::int32_t> stream_episodes = download(b.episodes);
    const float graph_ms = timed(graph_run);
    const std::vector<float> state = download(b.state);
    const std::vector<float> reward = download(b.reward);
    const std::vector<std::int32_t> episodes = download(b.episodes), episode_steps = download(b.steps);

    // 1. Same kernels, same order: graph replay and stream launches agree bit for bit.
    const bool same = state == stream_state && episodes == stream_episodes;
    std::printf("graph replay and stream launches end in the same state: %s\n", same ? "yes" : "NO");
    ok = ok && same;
    // 2. Every step paid reward 1 to every environment.
    double total_reward = 0, total_episodes = 0;
    for (int e = 0; e < envs; ++e) {
      total_reward += reward[e];
      total_episodes += episodes[e];
    }
    const double want_reward = double(envs) * steps_per_graph * replays;
    std::printf("reward sum %.0f (want %.0f), %.0f episodes finished, mean episode length %.1f steps\n", total_reward,
                want_reward, total_episodes, total_episodes > 0 ? want_reward / total_episodes : 0.0);
    ok = ok && total_reward == want_reward && total_episodes > 0;
    // 3. One more step on the GPU against the host reference, for every environment.
    runtime.launch(one_step, stream.get());
    SAMPLE_CHECK(cudaStreamSynchronize(stream.get()));
    const std::vector<float> next = download(b.state);
    const std::vector<std::int32_t> next_episodes = download(b.episodes);
    std::size_t bad = 0, borderline = 0;
    for (int e = 0; e < envs; ++e) {
      ref::CartPoleEnv env;
      env.state = ref::CartPole{state[e], state[envs + e], state[2 * envs + e], state[3 * envs + e]};
      env.episodes = episodes[e];
      env.episode_steps = episode_steps[e];
      const float obs = env.state.theta + 0.5f * env.state.theta_dot + 0.01f * env.state.x_dot;
      if (std::fabs(obs) < 1e-6f) { ++borderline; continue; }  // policy decision within rounding
      const int action = obs > 0.0f ? 1 : 0;
      ref::CartPole moved = env.state;
      ref::cartpole_dynamics(moved, action);
      if (std::fabs(std::fabs(moved.x) - 2.4f) < 1e-5f || std::fabs(std::fabs(moved.theta) - 0.20943951f) < 1e-5f) {
        ++borderline;
        continue;
      }
      ref::cartpole_step(env, seed, e, max_steps, action);
      const float got[4] = {next[e], next[envs + e], next[2 * envs + e], next[3 * envs + e]};
      const float want[4] = {env.state.x, env.state.x_dot, env.state.theta, env.state.theta_dot};
      bool same_env = next_episodes[e] == env.episodes;
      for (int k = 0; k < 4; ++k) same_env = same_env && std::fabs(got[k] - want[k]) <= 1e-5f * std::max(1.0f, std::fabs(want[k]));
      bad += !same_env;
    }
    std::printf("last step vs host reference: %zu mismatches in %d environments (%zu within rounding of a decision)\n", bad,
                envs, borderline);
    ok = ok && bad == 0 && borderline < envs / 1000;

    const double steps_total = double(steps_per_graph) * replays;
    std::printf("rl_cartpole: %d environments x %.0f steps\n", envs, steps_total);
    std::printf("%-30s %10s %16s\n", "", "GPU ms", "env-steps/s");
    std::printf("%-30s %10.2f %16.3e\n", "graph replay", graph_ms, envs * steps_total / (graph_ms * 1e-3));
    std::printf("%-30s %10.2f %16.3e\n", "kernels one by one (stream)", stream_ms, envs * steps_total / (stream_ms * 1e-3));
    std::printf("ratio stream / graph: %.2f\n", stream_ms / graph_ms);
  } catch (const flowdsl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf(ok ? "rl_cartpole: matches reference\n" : "rl_cartpole: DOES NOT match reference\n");
  return ok ? 0 : 1;
}
