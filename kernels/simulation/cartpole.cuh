// SPDX-License-Identifier: Apache-2.0
// Vectorised CartPole-v1: gym's Euler dynamics in float, reset on done from a counter-based
// random state (the host reference draws the same bits).
//
// A thread steps 4 consecutive environments with 16-byte accesses (the state rows, action,
// reward, step counts; done as one 4-byte store) when n % 4 == 0 and the arrays are aligned,
// else one environment at a time. The step uses the fast sine/cosine (absolute error under
// 4e-7 on the pole angles CartPole reaches, |theta| < 0.25) and one division.
#pragma once

#include "../common.cuh"
#include "../counter_hash.hpp"

namespace flowdsl::kernels::detail {

__device__ __forceinline__ void cartpole_initial(std::uint64_t seed, std::uint64_t env, std::uint64_t episode, float* state,
                                                 std::int32_t n) {
  const std::uint64_t episode_seed = hash(seed, episode);
#pragma unroll
  for (int k = 0; k < 4; ++k) state[static_cast<std::int64_t>(k) * n + env] = __fmaf_rn(0.1f, unit_float(hash(episode_seed, 4 * env + k)), -0.05f);
}

/// One Euler step of gym's CartPole dynamics; returns whether the pole fell or the cart left.
__device__ __forceinline__ bool cartpole_dynamics(float& x, float& x_dot, float& theta, float& theta_dot, std::int32_t action) {
  constexpr float gravity = 9.8f, masspole = 0.1f, total_mass = 1.1f, length = 0.5f, polemass_length = 0.05f,
                  force_mag = 10.0f, tau = 0.02f;
  constexpr float theta_threshold = 12.0f * 2.0f * 3.14159265358979f / 360.0f, x_threshold = 2.4f;
  const float force = action == 1 ? force_mag : -force_mag;
  float sintheta, costheta;
  __sincosf(theta, &sintheta, &costheta);
  const float temp = (force + polemass_length * theta_dot * theta_dot * sintheta) * (1.0f / total_mass);
  const float thetaacc = __fdividef(gravity * sintheta - costheta * temp,
                                    length * (4.0f / 3.0f - masspole * costheta * costheta * (1.0f / total_mass)));
  const float xacc = temp - polemass_length * thetaacc * costheta * (1.0f / total_mass);
  x += tau * x_dot;
  x_dot += tau * xacc;
  theta += tau * theta_dot;
  theta_dot += tau * thetaacc;
  return x < -x_threshold || x > x_threshold || theta < -theta_threshold || theta > theta_threshold;
}

/// Steps environments e .. e + 3 (W = 4, 16-byte accesses) or e alone (W = 1).
template <int W>
__device__ __forceinline__ void cartpole_step_group(std::int32_t e, std::int32_t n, std::uint64_t seed, std::int32_t max_steps,
                                                    const std::int32_t* action, float* state, float* reward_sum,
                                                    std::int32_t* episode_steps, std::int32_t* episodes, std::uint8_t* done) {
  using F = Vec<float, W>;
  using I = Vec<std::int32_t, W>;
  F s[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) s[k] = *reinterpret_cast<const F*>(state + static_cast<std::int64_t>(k) * n + e);
  const I a = *reinterpret_cast<const I*>(action + e);
  F reward = *reinterpret_cast<const F*>(reward_sum + e);
  I steps = *reinterpret_cast<const I*>(episode_steps + e);
  Vec<std::uint8_t, W> finished;
#pragma unroll
  for (int t = 0; t < W; ++t) {
    const bool terminated = cartpole_dynamics(s[0].v[t], s[1].v[t], s[2].v[t], s[3].v[t], a.v[t]);
    reward.v[t] += 1.0f;
    steps.v[t] += 1;
    finished.v[t] = terminated || (max_steps > 0 && steps.v[t] >= max_steps);
    if (finished.v[t]) steps.v[t] = 0;
  }
  *reinterpret_cast<F*>(reward_sum + e) = reward;
  *reinterpret_cast<I*>(episode_steps + e) = steps;
  *reinterpret_cast<Vec<std::uint8_t, W>*>(done + e) = finished;
  if constexpr (W == 1) {
    if (finished.v[0]) {
      const std::int32_t episode = episodes[e] + 1;
      episodes[e] = episode;
      cartpole_initial(seed, e, static_cast<std::uint64_t>(episode), state, n);
      return;
    }
  } else {
#pragma unroll
    for (int t = 0; t < W; ++t) {  // a finished environment's state is drawn afresh, below
      if (finished.v[t]) {
        const std::int32_t episode = episodes[e + t] + 1;
        episodes[e + t] = episode;
        const std::uint64_t episode_seed = hash(seed, static_cast<std::uint64_t>(episode));
#pragma unroll
        for (int k = 0; k < 4; ++k) s[k].v[t] = __fmaf_rn(0.1f, unit_float(hash(episode_seed, 4 * static_cast<std::uint64_t>(e + t) + k)), -0.05f);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) *reinterpret_cast<F*>(state + static_cast<std::int64_t>(k) * n + e) = s[k];
}

__global__ void cartpole_step_kernel(std::int32_t n, std::uint64_t seed, std::int32_t max_steps, const std::int32_t* action,
                                     float* state, float* reward_sum, std::int32_t* episode_steps, std::int32_t* episodes,
                                     std::uint8_t* done) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  const std::int32_t thread = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
  const bool vectorised = n % 4 == 0 && aligned<16>(state) && aligned<16>(action) && aligned<16>(reward_sum) &&
                          aligned<16>(episode_steps) && aligned<4>(done);
  if (vectorised) {
    for (std::int32_t g = thread; g < n / 4; g += stride) {
      cartpole_step_group<4>(4 * g, n, seed, max_steps, action, state, reward_sum, episode_steps, episodes, done);
    }
  } else {
    for (std::int32_t e = thread; e < n; e += stride) {
      cartpole_step_group<1>(e, n, seed, max_steps, action, state, reward_sum, episode_steps, episodes, done);
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
