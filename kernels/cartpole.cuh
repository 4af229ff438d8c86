// Vectorised CartPole-v1: one thread per environment, gym's Euler dynamics in float, reset on
// done from a counter-based random state (the host reference draws the same bits).
#pragma once

#include "common.cuh"
#include "counter_hash.hpp"

namespace flowdsl::kernels::detail {

__device__ __forceinline__ void cartpole_initial(std::uint64_t seed, std::uint64_t env, std::uint64_t episode, float* state,
                                                 std::int32_t n) {
  const std::uint64_t episode_seed = hash(seed, episode);
#pragma unroll
  for (int k = 0; k < 4; ++k) state[static_cast<std::int64_t>(k) * n + env] = __fmaf_rn(0.1f, unit_float(hash(episode_seed, 4 * env + k)), -0.05f);
}

__global__ void cartpole_step_kernel(std::int32_t n, std::uint64_t seed, std::int32_t max_steps, const std::int32_t* action,
                                     float* state, float* reward_sum, std::int32_t* episode_steps, std::int32_t* episodes,
                                     std::uint8_t* done) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  constexpr float gravity = 9.8f, masspole = 0.1f, total_mass = 1.1f, length = 0.5f, polemass_length = 0.05f,
                  force_mag = 10.0f, tau = 0.02f;
  constexpr float theta_threshold = 12.0f * 2.0f * 3.14159265358979f / 360.0f, x_threshold = 2.4f;
  for (std::int32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x) {
    float x = state[e], x_dot = state[n + e], theta = state[2 * static_cast<std::int64_t>(n) + e],
          theta_dot = state[3 * static_cast<std::int64_t>(n) + e];
    const float force = action[e] == 1 ? force_mag : -force_mag;
    float sintheta, costheta;
    sincosf(theta, &sintheta, &costheta);
    const float temp = (force + polemass_length * theta_dot * theta_dot * sintheta) / total_mass;
    const float thetaacc =
        (gravity * sintheta - costheta * temp) / (length * (4.0f / 3.0f - masspole * costheta * costheta / total_mass));
    const float xacc = temp - polemass_length * thetaacc * costheta / total_mass;
    x += tau * x_dot;
    x_dot += tau * xacc;
    theta += tau * theta_dot;
    theta_dot += tau * thetaacc;
    const bool terminated = x < -x_threshold || x > x_threshold || theta < -theta_threshold || theta > theta_threshold;
    reward_sum[e] += 1.0f;
    const std::int32_t steps = episode_steps[e] + 1;
    const bool finished = terminated || (max_steps > 0 && steps >= max_steps);
    done[e] = finished ? 1 : 0;
    if (finished) {
      const std::int32_t episode = episodes[e] + 1;
      episodes[e] = episode;
      episode_steps[e] = 0;
      cartpole_initial(seed, e, static_cast<std::uint64_t>(episode), state, n);
    } else {
      episode_steps[e] = steps;
      state[e] = x;
      state[n + e] = x_dot;
      state[2 * static_cast<std::int64_t>(n) + e] = theta;
      state[3 * static_cast<std::int64_t>(n) + e] = theta_dot;
    }
  }
}

__global__ void cartpole_reset_kernel(std::int32_t n, std::uint64_t seed, float* state, float* reward_sum,
                                      std::int32_t* episode_steps, std::int32_t* episodes, std::uint8_t* done) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  for (std::int32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x) {
    cartpole_initial(seed, e, 0, state, n);
    reward_sum[e] = 0.0f;
    episode_steps[e] = 0;
    episodes[e] = 0;
    done[e] = 0;
  }
}

}  // namespace flowdsl::kernels::detail
