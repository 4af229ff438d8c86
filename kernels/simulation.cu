// Launchers and registration of the heat-diffusion step and the CartPole environment.
#include "cartpole.cuh"
#include "heat2d.cuh"
#include "launch.cuh"

namespace flowdsl::kernels {

Heat2dNodes heat2d_step(Graph& g, const std::string& name, i32 nx, i32 ny, float alpha, const float* u, float* u_next,
                        double* partials, float* residual) {
  // At most 32 x 32 blocks: sum_max_partials partials.
  const Dim3 grid(std::min<std::uint32_t>(blocks_for(nx, detail::heat_block_x), 32),
                  std::min<std::uint32_t>(blocks_for(ny, detail::heat_block_y), 32));
  auto step = detail::declare(g, name + ".step", detail::heat2d_step_kernel, "heat2d_step", grid,
                              Dim3(detail::heat_block_x, detail::heat_block_y))
                  .args(nx, ny, alpha, u, u_next, partials);
  auto finish = detail::declare_sum_finish(g, name, static_cast<i32>(grid.volume()), partials, true, residual);
  finish.after(step);
  return Heat2dNodes{step, finish};
}

KernelNode<i32, u64, i32, const i32*, float*, float*, i32*, i32*, u8*> cartpole_step(Graph& g, std::string name, i32 n, u64 seed,
                                                                                     i32 max_steps, const i32* action, float* state,
                                                                                     float* reward_sum, i32* episode_steps,
                                                                                     i32* episodes, u8* done) {
  return detail::declare(g, std::move(name), detail::cartpole_step_kernel, "cartpole_step", blocks_for(n, 256), 256)
      .args(n, seed, max_steps, action, state, reward_sum, episode_steps, episodes, done);
}

KernelNode<i32, u64, float*, float*, i32*, i32*, u8*> cartpole_reset(Graph& g, std::string name, i32 n, u64 seed, float* state,
                                                                     float* reward_sum, i32* episode_steps, i32* episodes, u8* done) {
  return detail::declare(g, std::move(name), detail::cartpole_reset_kernel, "cartpole_reset", blocks_for(n, 256), 256)
      .args(n, seed, state, reward_sum, episode_steps, episodes, done);
}

namespace detail {
void register_simulation(KernelRegistry& r) {
  r.add("heat2d_step", heat2d_step_kernel, {"nx", "ny", "alpha", "u", "u_next", "partials"},
        "one 5-point heat-diffusion step, fixed boundary; squared change per block into partials");
  r.add("cartpole_step", cartpole_step_kernel,
        {"n", "seed", "max_steps", "action", "state", "reward_sum", "episode_steps", "episodes", "done"},
        "CartPole-v1 step of n environments (state SoA [4][n]) with reset on done");
  r.add("cartpole_reset", cartpole_reset_kernel, {"n", "seed", "state", "reward_sum", "episode_steps", "episodes", "done"},
        "CartPole initial states for seed, counters zeroed");
}
}  // namespace detail

}  // namespace flowdsl::kernels
