// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file reference.hpp
/// \brief Host reference implementations of the built-in kernels, in double where it matters.
/// Host-only (g++): the tests compare the kernels with these, and their own cpu tests run in
/// the sanitizer build. Inputs and outputs are float; the tests convert other element types.

#include <cstdint>
#include <vector>

namespace flowdsl::kernels::reference {

using Floats = std::vector<float>;

/// \brief act(x) for activation code `act` (0 none, 1 relu, 2 gelu (erf form), 3 silu).
double activate(int act, double x);

Floats iota(std::int64_t n, float start, float step);
Floats axpy(float a, const Floats& x, const Floats& y);
Floats clamp(float lo, float hi, const Floats& x);
/// \brief y[r, c] = act(x[r, c] + bias[c]).
Floats bias_activation(std::int64_t rows, int cols, int act, const Floats& x, const Floats& bias);

/// \brief The value random_uniform writes at index i: from hash(seed, i / 2), its top 24 bits
/// for even i, bits 16..39 for odd i.
float uniform(std::uint64_t seed, std::uint64_t i, float lo, float hi);
/// \brief The value random_normal writes at index i (computed in double; the kernel in float):
/// Box–Muller on hash(seed, i / 2), the cosine output for even i, the sine output for odd i.
double normal(std::uint64_t seed, std::uint64_t i, float mean, float stddev);

std::vector<double> row_sum(int rows, int cols, const Floats& x);
Floats row_max(int rows, int cols, const Floats& x);
/// \brief First index of the largest element of each row; -1 for an empty row.
std::vector<std::int32_t> row_argmax(int rows, int cols, const Floats& x);
/// row_argmax's answers as argmax keys (kernels/reduction/argmax_key.hpp) of first + the index.
std::vector<std::uint64_t> row_argmax_key(int rows, int cols, int first, const Floats& x);
/// \brief Sum in long double, and the sum of absolute values (the scale of its rounding error).
double sum(const Floats& x, double* abs_sum = nullptr);
/// \brief Row-wise softmax, max-subtracted, in double: finite for any finite input.
std::vector<double> softmax(int rows, int cols, const Floats& x);
std::vector<double> layer_norm(int rows, int cols, float eps, const Floats& x, const Floats& gamma, const Floats& beta);

/// \brief Padded [batch, width] values and mask (see kernels::pad).
struct Padded {
  Floats values;
  std::vector<std::uint8_t> mask;
};
Padded pad(int batch, int width, float pad_value, const Floats& values, const std::vector<std::int32_t>& offsets);
/// \brief Packed rows from a padded tensor (see kernels::crop); offsets.back() elements.
Floats crop(int batch, int width, float pad_value, const Floats& padded, const std::vector<std::int32_t>& offsets);
Floats gather_rows(int cols, const std::vector<std::int32_t>& index, int src_rows, const Floats& in);
/// gather_rows of the table rows first .. first + src_rows, which `in` holds alone.
Floats gather_rows_from(int cols, const std::vector<std::int32_t>& index, int first, int src_rows, const Floats& in);

/// \brief One heat-diffusion step (see kernels::heat2d_step); *residual = ||u' - u||_2.
Floats heat2d_step(int nx, int ny, float alpha, const Floats& u, double* residual);

/// \brief CartPole-v1 state of one environment.
struct CartPole {
  float x = 0, x_dot = 0, theta = 0, theta_dot = 0;
};
/// \brief The state an environment restarts from for (seed, env, episode): each component
/// uniform in [-0.05, 0.05).
CartPole cartpole_initial(std::uint64_t seed, std::uint64_t env, std::uint64_t episode);
/// \brief Gym's dynamics for one step with action 0 (push left) or 1 (push right), without
/// the reset. \return true when the new state is terminal (|x| > 2.4 or |theta| > 12 deg).
bool cartpole_dynamics(CartPole& s, int action);
/// \brief Per-environment bookkeeping of kernels::cartpole_step.
struct CartPoleEnv {
  CartPole state;
  float reward_sum = 0;
  std::int32_t episode_steps = 0;
  std::int32_t episodes = 0;
  std::uint8_t done = 0;
};
/// \brief One step of environment `env` with reset-on-done, as kernels::cartpole_step does it.
void cartpole_step(CartPoleEnv& e, std::uint64_t seed, std::uint64_t env, int max_steps, int action);

/// \brief The value condition.case sets: value - lower when lower <= value <= upper, else
/// upper - lower + 1 (0xFFFFFFFF when the range is empty or holds 2^32 - 1 values or more).
std::uint32_t condition_case(std::int32_t value, std::int32_t lower, std::int32_t upper);
/// \brief The value condition.bucket sets: the smallest b with 2^b >= count (0 for count <= 1),
/// at most cases - 1 (0 when cases < 1).
std::uint32_t condition_bucket(std::int32_t count, std::int32_t cases);

/// \brief y[r, c] = x[r, c] / sqrt(mean of row r's squares + eps) * w[c], in double.
std::vector<double> rms_norm(int rows, int cols, float eps, const Floats& x, const Floats& w);
/// \brief out[i] = silu(gate[i]) * up[i], in double.
std::vector<double> silu_mul(const Floats& gate, const Floats& up);

/// \brief The geometry of a paged KV cache (kernels::PagedKv): each pool is [pages, kv_heads,
/// page_size, head_dim]; the block table is [sequences, pages_per_seq].
struct PagedKv {
  int q_heads = 0, kv_heads = 0, head_dim = 0, page_size = 0, pages_per_seq = 0, sequences = 0, pages = 0;
};
/// \brief What rope_kv_append does: q ([tokens, q_heads, head_dim]) the rotated queries, and the
/// rotated keys and the values appended into the pools at each token's slot (an out-of-bounds
/// sequence, position or page appends nothing). Angles pos * inv_freq[j] in double.
void rope_kv_append(const PagedKv& kv, int tokens, const Floats& qkv, const std::vector<std::int32_t>& positions,
                    const std::vector<std::int32_t>& seq_of_token, const std::vector<std::int32_t>& block_table,
                    const Floats& inv_freq, Floats& q, Floats& k_cache, Floats& v_cache);
/// \brief Grouped-query attention of each token over positions 0 .. positions[t] of its
/// sequence, read from the pools through the block table, in double: [tokens, q_heads,
/// head_dim]. Positions whose page is out of bounds are left out; a token with none gets zeros.
std::vector<double> paged_attention(const PagedKv& kv, int tokens, float scale, const Floats& q,
                                    const std::vector<std::int32_t>& positions,
                                    const std::vector<std::int32_t>& seq_of_token,
                                    const std::vector<std::int32_t>& block_table, const Floats& k_cache,
                                    const Floats& v_cache);

/// \brief The token sample_top_p draws for each row of [rows, cols] logits, by sorting, in
/// double: greedy (first index of the max) for temperature <= 0; else p = exp((x - max) /
/// temperature) cut to the top_k largest logits and then to the smallest set of largest
/// probabilities holding top_p of their mass (ties at either threshold kept), and the first kept
/// index whose running sum exceeds u times the kept total, u = sampling_draw(seed, step, row) /
/// 2^24. NaN counts as -inf; a row of only -inf and NaN gets -1.
std::vector<std::int32_t> sample_top_p(int rows, int cols, float temperature, int top_k, float top_p,
                                       std::uint64_t seed, std::int32_t step, const Floats& logits);

/// \brief c = act(a b + bias) for row-major a[m, k], b[k, n] (bias may be empty), in double.
std::vector<double> matmul(int m, int n, int k, const Floats& a, const Floats& b, const Floats& bias, int act);

}  // namespace flowdsl::kernels::reference
