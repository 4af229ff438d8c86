// SPDX-License-Identifier: Apache-2.0
// Descriptors and launchers of the heat-diffusion step and the CartPole environment.
#include "cartpole.cuh"
#include "../descriptor.cuh"
#include "heat2d.cuh"

namespace flowdsl::kernels {
namespace detail {
namespace {
/// At most 32 x 32 blocks: sum_max_partials partials.
Dim3 heat_grid(i32 nx, i32 ny) {
  return Dim3(std::min<std::uint32_t>(blocks_for(nx, heat_block_x), 32), std::min<std::uint32_t>(blocks_for(ny, heat_block_y), 32));
}
struct ByTile : Descriptor {
  using instances = NoTypes;
  template <class... A>
  static LaunchShape shape(i32 nx, i32 ny, const A&...) {
    return {heat_grid(nx, ny), Dim3(heat_block_x, heat_block_y)};
  }
};
/// A thread per environment up to 32768 blocks (8M threads), then the kernels stride: the
/// step kernel takes 4 environments a thread, so at 32M environments every thread is busy
/// and ~30 waves of blocks keep the tail short.
struct ByEnvironment : Descriptor {
  using instances = NoTypes;
  template <class... A>
  static LaunchShape shape(i32 n, const A&...) {
    return {std::min<std::uint32_t>(blocks_for(n, 256), 32768), 256};
  }
};

#define FLOWDSL_SIMULATION_KERNELS(X)                                                                                  \
  X(Heat2dStep, ByTile, "heat2d_step",                                                                                 \
    "one 5-point heat-diffusion step, fixed boundary; squared change per block into partials", heat2d_step_kernel,    \
    "nx", "ny", "alpha", "u: nx * ny", "u_next: nx * ny", "partials: grid.x * grid.y")                                                                    \
  X(CartpoleStep, ByEnvironment, "cartpole_step",                                                                      \
    "CartPole-v1 step of n environments (state SoA [4][n]) with reset on done", cartpole_step_kernel, "n", "seed",     \
    "max_steps", "action: n", "state: 4 * n", "reward_sum: n", "episode_steps: n", "episodes: n", "done: n")                                 \
  X(CartpoleReset, ByEnvironment, "cartpole_reset", "CartPole initial states for seed, counters zeroed",               \
    cartpole_reset_kernel, "n", "seed", "state: 4 * n", "reward_sum: n", "episode_steps: n", "episodes: n", "done: n")
FLOWDSL_SIMULATION_KERNELS(FLOWDSL_KERNEL)
}  // namespace

void register_simulation(KernelRegistry& registry) { FLOWDSL_REGISTER_LIST(registry, FLOWDSL_SIMULATION_KERNELS); }
}  // namespace detail

Heat2dNodes heat2d_step(Into g, const std::string& name, i32 nx, i32 ny, float alpha, const float* u, float* u_next,
                        double* partials, float* residual) {
  auto step = heat2d_stencil(g, name + ".step", nx, ny, alpha, u, u_next, partials);
  const auto blocks = static_cast<i32>(detail::heat_grid(nx, ny).volume());
  auto finish = detail::declare_sum_finish(g, name, blocks, partials, true, residual);
  finish.after(step);
  return Heat2dNodes{step, finish};
}

KernelNode<i32, i32, float, const float*, float*, double*> heat2d_stencil(Into g, std::string name, i32 nx, i32 ny, float alpha,
                                                                          const float* u, float* u_next, double* partials) {
  return detail::declare<detail::Heat2dStep>(g, std::move(name), nx, ny, alpha, u, u_next, partials);
}

KernelNode<i32, u64, i32, const i32*, float*, float*, i32*, i32*, u8*> cartpole_step(Into g, std::string name, i32 n, u64 seed,
                                                                                     i32 max_steps, const i32* action, float* state,
                                                                                     float* reward_sum, i32* episode_steps,
                                                                                     i32* episodes, u8* done) {
  return detail::declare<detail::CartpoleStep>(g, std::move(name), n, seed, max_steps, action, state, reward_sum, episode_steps,
                                               episodes, done);
}

KernelNode<i32, u64, float*, float*, i32*, i32*, u8*> cartpole_reset(Into g, std::string name, i32 n, u64 seed, float* state,
                                                                     float* reward_sum, i32* episode_steps, i32* episodes, u8* done) {
  return detail::declare<detail::CartpoleReset>(g, std::move(name), n, seed, state, reward_sum, episode_steps, episodes, done);
}

}  // namespace flowdsl::kernels
