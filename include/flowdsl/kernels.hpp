// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file kernels.hpp
/// \brief The built-in kernel library: typed launchers that add one kernel node (or a short
/// chain) to a Graph, and register_builtins() that makes every kernel known by name.
///
/// Each launcher picks grid and block from the problem size; the returned handle can override
/// them (`.grid()`, `.block()`) and rebind any argument (`.arg<I>()`, a parameter-only update).
/// Element types: `T` is float, __half or __nv_bfloat16 unless a launcher says otherwise;
/// arithmetic is done in float. Pointers need only the alignment of their element type;
/// 16-byte-aligned ones take the vectorised path.
///
/// Each launcher declares its node where it is told (Into): at the top level of a Graph, or in
/// a body of a node (a child graph's, a conditional node's).
///
/// \code
///   flowdsl::Graph g;
///   auto k = flowdsl::kernels::axpy(g, "axpy", n, 2.0f, d_x, d_y);   // y = 2 x + y
///   k.arg<1>(3.0f);                                                     // next launch: y = 3 x + y
///   auto loop = g.while_loop("refine", flowdsl::ConditionDefault{1});
///   flowdsl::kernels::scale(loop.body(), "halve", n, 0.5f, d_y, d_y);  // in the loop's body
/// \endcode

#include <cstdint>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flowdsl/condition.hpp"
#include "flowdsl/graph.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl::kernels {

using i64 = std::int64_t;
using i32 = std::int32_t;
using u8 = std::uint8_t;
using u64 = std::uint64_t;

/// \brief Where a launcher declares its node: the top level of a Graph, or a body of a node
/// (`stage.body()`, `loop.body()`, `cases.body(2)`). Converts from either, so that a launcher
/// takes `g` and `loop.body()` alike. A non-owning reference, valid while the Graph lives.
class Into {
 public:
  Into(Graph& graph) : body_(&graph.state(), no_node, 0) {}  // the top level is body 0 of no node
  Into(Body body) : body_(body) {}
  /// \brief The builder the node is declared with.
  Body& builder() noexcept { return body_; }

 private:
  Body body_;
};

/// \brief Activation applied after a bias (an i32 kernel parameter: values are stable).
enum class Activation : std::int32_t { none = 0, relu = 1, gelu = 2, silu = 3 };
/// The names of Activation's values in order, as the registered kernels declare them (graph
/// files may write `"activation": "gelu"`).
#define FLOWDSL_ACTIVATION_NAMES "{none, relu, gelu, silu}"

// ---------------------------------------------------------------- elementwise ----------------

/// \brief out[i] = value.
template <class T> KernelNode<i64, float, T*> fill(Into g, std::string name, i64 n, float value, T* out);
/// \brief out[i] = start + step * i.
template <class T> KernelNode<i64, float, float, T*> iota(Into g, std::string name, i64 n, float start, float step, T* out);
/// \brief y[i] = a * x[i] (x may equal y).
template <class T> KernelNode<i64, float, const T*, T*> scale(Into g, std::string name, i64 n, float a, const T* x, T* y);
/// \brief y[i] = a * x[i] + y[i].
template <class T> KernelNode<i64, float, const T*, T*> axpy(Into g, std::string name, i64 n, float a, const T* x, T* y);
/// \brief out[i] = a[i] + b[i].
template <class T> KernelNode<i64, const T*, const T*, T*> add(Into g, std::string name, i64 n, const T* a, const T* b, T* out);
/// \brief out[i] = a[i] * b[i].
template <class T> KernelNode<i64, const T*, const T*, T*> multiply(Into g, std::string name, i64 n, const T* a, const T* b, T* out);
/// \brief out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x): the gated activation of a
/// SwiGLU MLP (Llama's), from its gate and up projections. Fusable (Graph::fuse).
template <class T> KernelNode<i64, const T*, const T*, T*> silu_mul(Into g, std::string name, i64 n, const T* gate, const T* up, T* out);
/// \brief y[i] = min(max(x[i], lo), hi).
template <class T> KernelNode<i64, float, float, const T*, T*> clamp(Into g, std::string name, i64 n, float lo, float hi, const T* x, T* y);
/// \brief y[r, c] = act(x[r, c] + bias[c]) over a row-major [rows, cols] tensor, in one pass.
template <class T>
KernelNode<i64, i32, i32, const T*, const T*, T*> bias_activation(Into g, std::string name, i64 rows, i32 cols,
                                                                   Activation act, const T* x, const T* bias, T* y);

/// \brief y[i] = (Out) x[i], rounding to nearest even. In, Out: float, __half, __nv_bfloat16.
template <class In, class Out> KernelNode<i64, const In*, Out*> cast(Into g, std::string name, i64 n, const In* x, Out* y);

/// \brief out[i] = lo + (hi - lo) * u(seed, i), u in [0, 1) from a counter-based hash: the
/// same (seed, i) gives the same value on any grid and on the host (reference::uniform).
/// Elements 2k and 2k + 1 take two 24-bit fields of one hash of (seed, k).
template <class T>
KernelNode<i64, u64, float, float, T*> random_uniform(Into g, std::string name, i64 n, u64 seed, float lo, float hi, T* out);
/// \brief out[i] = mean + stddev * z(seed, i), z standard normal: elements 2k and 2k + 1 are
/// the cosine and sine outputs of one Box–Muller transform of the hash of (seed, k).
template <class T>
KernelNode<i64, u64, float, float, T*> random_normal(Into g, std::string name, i64 n, u64 seed, float mean, float stddev, T* out);

// ---------------------------------------------------------------- reductions -----------------

/// \brief out[r] = sum of row r of a row-major [rows, cols] tensor (float accumulation).
template <class T> KernelNode<i32, i32, const T*, float*> row_sum(Into g, std::string name, i32 rows, i32 cols, const T* x, float* out);
/// \brief out[r] = max of row r (-inf for an empty row).
template <class T> KernelNode<i32, i32, const T*, float*> row_max(Into g, std::string name, i32 rows, i32 cols, const T* x, float* out);
/// \brief out[r] = mean of row r.
template <class T> KernelNode<i32, i32, const T*, float*> row_mean(Into g, std::string name, i32 rows, i32 cols, const T* x, float* out);
/// \brief out[r] = index of the largest element of row r (the first one on ties; -1 if empty).
template <class T> KernelNode<i32, i32, const T*, i32*> row_argmax(Into g, std::string name, i32 rows, i32 cols, const T* x, i32* out);
/// \brief keys[r] = the argmax key of row r: its largest value and first + the index of its first
/// occurrence in one u64 that orders as the argmax does (0 for an empty row). A row split by
/// columns over ranks, each rank passing the first column it holds, meets in a max all-reduce of
/// the keys (nccl::all_reduce with ncclUint64, ncclMax); argmax_key_token then gives the index
/// in the whole row, the first on ties as row_argmax. Indices up to 2^31 - 2; rows without NaN.
/// \throws UsageError for a negative first.
template <class T>
KernelNode<i32, i32, i32, const T*, u64*> row_argmax_key(Into g, std::string name, i32 rows, i32 cols, i32 first, const T* x,
                                                         u64* keys);
/// \brief out[r] = the index keys[r] holds (row_argmax_key's; -1 for the key of an empty row).
KernelNode<i32, const u64*, i32*> argmax_key_token(Into g, std::string name, i32 rows, const u64* keys, i32* out);

/// \brief Partial sums per block, then one block adds them: deterministic for a given n and
/// grid (no atomics), accumulated in double.
inline constexpr i32 sum_max_partials = 1024;  ///< doubles the `partials` workspace must hold
template <class T>
struct SumNodes {
  KernelNode<i64, const T*, double*> partial;      ///< writes partials[0 .. grid)
  KernelNode<i32, const double*, i32, float*> finish;  ///< out[0] = sum of the partials (sqrt if asked)

  /// \brief The sum runs after every node given (its first kernel does).
  template <class... Ts>
  SumNodes& after(const Ts&... predecessors) {
    partial.after(predecessors...);
    return *this;
  }
  /// \brief Every node given runs after the sum (after its last kernel).
  template <class... Ts>
  SumNodes& before(const Ts&... successors) {
    finish.before(successors...);
    return *this;
  }
};
/// \brief out[0] = sum of x[0 .. n). `partials`: sum_max_partials doubles of scratch.
template <class T> SumNodes<T> sum(Into g, const std::string& name, i64 n, const T* x, double* partials, float* out);

/// \brief Row-wise softmax of a [rows, cols] tensor, max-subtracted (stable for any inputs).
template <class T> KernelNode<i32, i32, const T*, T*> softmax(Into g, std::string name, i32 rows, i32 cols, const T* x, T* y);
/// \brief Row-wise layer normalisation: y = (x - mean) / sqrt(var + eps) * gamma + beta
/// (biased variance; gamma and beta have cols elements).
template <class T>
KernelNode<i32, i32, float, const T*, const float*, const float*, T*> layer_norm(Into g, std::string name, i32 rows, i32 cols,
                                                                                 float eps, const T* x, const float* gamma,
                                                                                 const float* beta, T* y);

/// \brief Root-mean-square normalisation of each row, as Llama's RMSNorm computes it:
/// y = T(T(x * rsqrt(mean(x^2) + eps)) * w), float math (w has cols elements).
template <class T>
KernelNode<i32, i32, float, const T*, const T*, T*> rms_norm(Into g, std::string name, i32 rows, i32 cols, float eps,
                                                             const T* x, const T* w, T* y);
/// \brief residual = T(residual + x) in place, then y = rms_norm(residual): a decoder layer's
/// residual add and the next norm in one pass.
template <class T>
KernelNode<i32, i32, float, T*, const T*, const T*, T*> add_rms_norm(Into g, std::string name, i32 rows, i32 cols, float eps,
                                                                     T* residual, const T* x, const T* w, T* y);

// ---------------------------------------------------------------- attention ------------------

/// \brief The geometry of a paged KV cache, as serving engines keep one: the keys (and, alike,
/// the values) of every sequence in one pool of `pages` pages, each [kv_heads, page_size,
/// head_dim]; sequence s's position p is in page block_table[s * pages_per_seq + p / page_size],
/// slot p % page_size. q_heads is a multiple of kv_heads (grouped-query attention).
struct PagedKv {
  i32 q_heads = 0, kv_heads = 0, head_dim = 0;
  i32 page_size = 16;     ///< tokens a page
  i32 pages_per_seq = 0;  ///< entries of a row of the block table
  i32 sequences = 0;      ///< rows of the block table
  i32 pages = 0;          ///< pages of each pool
};
/// \brief The tokens of one step, all in device memory: token t is at position positions[t] of
/// sequence seq_of_token[t] (one a sequence when decoding; a run of consecutive positions for a
/// chunk of prefill). The block table is [sequences, pages_per_seq] page indices. Anything out of
/// bounds (a sequence, a position past the table, a page past the pool) is read or written nowhere.
struct DecodeTokens {
  i32 tokens = 0;
  const i32* positions = nullptr;
  const i32* seq_of_token = nullptr;
  const i32* block_table = nullptr;
};

template <class T>
using RopeKvAppendNode = KernelNode<i32, i32, i32, i32, i32, i32, i32, i32, const T*, const i32*, const i32*, const i32*,
                                    const float*, T*, T*, T*>;
/// \brief Rotary embedding and the cache append of a step: qkv holds each token's query, key and
/// value heads ([tokens, q_heads + 2 kv_heads, head_dim]); q gets the queries rotated by the
/// token's position, the key heads rotated and the value heads go to the token's cache slot.
/// Rotation pairs element j with j + head_dim / 2 (Hugging Face's rotate_half) at angle
/// position * inv_freq[j]; inv_freq (head_dim / 2 floats) carries the model's frequencies and any
/// scaling of them (Llama 3's).
/// \throws UsageError when `kv` is outside the kernels' limits (head_dim 1 to 256, at most 16
///         query heads a key/value head).
template <class T>
RopeKvAppendNode<T> rope_kv_append(Into g, std::string name, const PagedKv& kv, const DecodeTokens& batch, const T* qkv,
                                   const float* inv_freq, T* q, T* k_cache, T* v_cache);

/// \brief How decode_attention splits the context: blocks of split_len positions, `splits` of them
/// a (token, key/value head) — a (tile of a sequence's tokens, key/value head) on the tensor-core
/// path — so that a small batch still fills the GPU (flash-decoding).
struct AttentionSplits {
  i32 splits = 1;
  i32 split_len = 32;
};
/// \brief The splits decode_attention picks for `tokens` tokens of contexts up to max_context.
AttentionSplits attention_splits(i32 tokens, const PagedKv& kv, i32 max_context);
/// \brief Floats of the workspace decode_attention needs: tokens * q_heads * splits * (head_dim + 2).
std::int64_t attention_workspace_floats(i32 tokens, const PagedKv& kv, i32 max_context);

template <class T>
struct AttentionNodes {
  /// Each split's running max, sum and weighted values into the workspace.
  KernelNode<i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, float, const T*, const i32*, const i32*, const i32*, const T*,
             const T*, float*>
      partial;
  /// The splits combined into out.
  KernelNode<i32, i32, i32, i32, const float*, T*> combine;

  /// \brief The attention runs after every node given (its first kernel does).
  template <class... Ts>
  AttentionNodes& after(const Ts&... predecessors) {
    partial.after(predecessors...);
    return *this;
  }
  /// \brief Every node given runs after the attention (after its last kernel).
  template <class... Ts>
  AttentionNodes& before(const Ts&... successors) {
    combine.before(successors...);
    return *this;
  }
};
/// \brief Grouped-query attention of each token's query heads (q: [tokens, q_heads, head_dim])
/// over positions 0 .. its own of its sequence in the paged cache, softmax in float, scores
/// scaled by `scale` (1 / sqrt(head_dim) for Llama): out is [tokens, q_heads, head_dim]. Causal
/// inside a chunk of prefill tokens too, since their keys are appended first. Contexts longer than
/// max_context are attended in full, with fewer blocks than they would fill. `workspace` holds
/// attention_workspace_floats(tokens, kv, max_context) floats.
/// \throws UsageError as rope_kv_append.
template <class T>
AttentionNodes<T> decode_attention(Into g, const std::string& name, const PagedKv& kv, const DecodeTokens& batch,
                                   i32 max_context, float scale, const T* q, const T* k_cache, const T* v_cache,
                                   float* workspace, T* out);

/// \brief positions[t] += 1 for t < tokens: ends a decode step whose argmax (or sampler) writes each
/// sequence's next token over its input, so that the same executable, launched again, decodes
/// the next token with no host write in between. Registered as "advance_positions.i32".
KernelNode<i32, i32*> advance_positions(Into g, std::string name, i32 tokens, i32* positions);

// ---------------------------------------------------------------- sampling -------------------

/// \brief Draws each row's next token from a language model's logits ([rows, cols], cols the
/// vocabulary): out[r] is a token of softmax(logits[r] / temperature) within top_k and top_p,
/// drawn with Philox4x32-10 keyed by `seed` (low 32 bits, then high) at counter
/// (step[0], r, 0, 0), so that the same seed and step give the same tokens on any grid (and on
/// the host: reference::sample_top_p). `step` (one i32) is read on the device when the kernel
/// runs: a graph replayed each decoding step draws new numbers after a copy into it, without a
/// parameter update; null reads as step 0.
///
/// temperature <= 0: greedy, the first index of the largest logit. Else top_k in [1, cols)
/// keeps the logits at least the k-th largest, all of those equal to it included (0, negative or
/// >= cols: no limit); top_p < 1 then keeps the smallest set of largest probabilities holding at
/// least top_p of the kept mass, all of those equal to its smallest included (>= 1: no limit;
/// <= 0: the largest logit only); the token is the first kept index, in index order, at which
/// the running sum of kept probabilities exceeds u times their total, u the top 24 bits of
/// Philox's first output word over 2^24. NaN logits count as -inf and are never drawn; a row of
/// only -inf and NaN gets -1. Probabilities are fixed-point (units of 2^-(63 - bit_width(cols))
/// of the largest), summed exactly: one below that unit is never drawn.
template <class T>
KernelNode<i32, i32, float, i32, float, u64, const i32*, const T*, i32*> sample_top_p(
    Into g, std::string name, i32 rows, i32 cols, float temperature, i32 top_k, float top_p, u64 seed, const i32* step,
    const T* logits, i32* out);

// ---------------------------------------------------------------- batching -------------------

/// \brief Pads `batch` variable-length rows into a fixed [batch, width] tensor. Row b is
/// values[offsets[b] .. offsets[b+1]); longer rows are cut at width. out gets pad_value and
/// mask 0 past each row's end, mask 1 where a value was copied. `mask` may be null.
template <class T>
KernelNode<i32, i32, float, const T*, const i32*, T*, u8*> pad(Into g, std::string name, i32 batch, i32 width, float pad_value,
                                                               const T* values, const i32* offsets, T* out, u8* mask);
/// \brief The inverse of pad: writes each row back to values[offsets[b] ..]; the part of a
/// row that did not fit in width gets pad_value.
template <class T>
KernelNode<i32, i32, float, const T*, const i32*, T*> crop(Into g, std::string name, i32 batch, i32 width, float pad_value,
                                                           const T* in, const i32* offsets, T* values);
/// \brief out[r, :] = in[index[r], :] for r < count (cols columns); an index outside
/// [0, src_rows) yields a row of zeros.
template <class T>
KernelNode<i32, i32, const i32*, i32, const T*, T*> gather_rows(Into g, std::string name, i32 count, i32 cols, const i32* index,
                                                               i32 src_rows, const T* in, T* out);
/// \brief gather_rows from the rows first .. first + src_rows of a larger table, which `in` holds
/// alone: out[r, :] = in[index[r] - first, :], zeros for an index outside that range. Ranks that
/// each hold a share of an embedding (split by vocabulary) gather their rows, and a sum
/// all-reduce gives every rank the whole gather.
template <class T>
KernelNode<i32, i32, const i32*, i32, i32, const T*, T*> gather_rows_from(Into g, std::string name, i32 count, i32 cols,
                                                                         const i32* index, i32 first, i32 src_rows,
                                                                         const T* in, T* out);

// ---------------------------------------------------------------- simulation -----------------

/// \brief One explicit step of 2-D heat diffusion on a row-major [ny, nx] grid with fixed
/// boundary: interior u'[i] = u[i] + alpha (sum of 4 neighbours - 4 u[i]); boundary copied.
/// `finish` writes residual[0] = || u' - u ||_2. `partials`: sum_max_partials doubles.
struct Heat2dNodes {
  KernelNode<i32, i32, float, const float*, float*, double*> step;
  KernelNode<i32, const double*, i32, float*> finish;

  /// \brief The step runs after every node given (its stencil does).
  template <class... Ts>
  Heat2dNodes& after(const Ts&... predecessors) {
    step.after(predecessors...);
    return *this;
  }
  /// \brief Every node given runs after the step (after its residual).
  template <class... Ts>
  Heat2dNodes& before(const Ts&... successors) {
    finish.before(successors...);
    return *this;
  }
};
Heat2dNodes heat2d_step(Into g, const std::string& name, i32 nx, i32 ny, float alpha, const float* u, float* u_next,
                        double* partials, float* residual);

/// \brief The step of heat2d_step without its residual: u_next from u, and the squared change
/// per block into `partials` (sum_max_partials doubles), left unfinished. For a step whose
/// residual is not needed, e.g. the first of two steps before a convergence test.
KernelNode<i32, i32, float, const float*, float*, double*> heat2d_stencil(Into g, std::string name, i32 nx, i32 ny, float alpha,
                                                                          const float* u, float* u_next, double* partials);

/// \brief CartPole-v1 (gym rules: gravity 9.8, cart 1.0, pole 0.1, half-length 0.5, force 10,
/// tau 0.02, Euler; done when |x| > 2.4 or |theta| > 12 degrees, or after max_steps steps when
/// max_steps > 0). State is structure-of-arrays: state[k * n + e], k = x, x_dot, theta,
/// theta_dot. Each step adds reward 1 to reward_sum[e]; a finished environment counts an
/// episode, sets done[e] = 1 and restarts from a state uniform in [-0.05, 0.05) drawn from
/// (seed, e, episodes[e]).
KernelNode<i32, u64, i32, const i32*, float*, float*, i32*, i32*, u8*> cartpole_step(Into g, std::string name, i32 n, u64 seed,
                                                                                     i32 max_steps, const i32* action, float* state,
                                                                                     float* reward_sum, i32* episode_steps,
                                                                                     i32* episodes, u8* done);
/// \brief Sets every environment to its initial state for `seed` (episode 0) and zeroes the counters.
KernelNode<i32, u64, float*, float*, i32*, i32*, u8*> cartpole_reset(Into g, std::string name, i32 n, u64 seed, float* state,
                                                                     float* reward_sum, i32* episode_steps, i32* episodes, u8* done);

// ---------------------------------------------------------------- matrix multiply -------------

/// \brief c[m, n] = act(a[m, k] b[k, n] + bias[n]), row-major, float accumulation; any m, n, k.
/// T = __half or __nv_bfloat16 runs on tensor cores (on Hopper: wgmma fed by the copy engine,
/// which wants a and b 16-byte aligned with k and n multiples of 8; other shapes and pointers
/// take a slower generic path in the same kernel); T = float on the FMA units (exact float).
/// `bias` may be null. The f16/bf16 kernel asks for about 194 KiB of dynamic shared memory
/// (the launch shape says so; keep it when overriding the grid).
template <class T>
KernelNode<i32, i32, i32, const T*, const T*, const float*, i32, float*> matmul(Into g, std::string name, i32 m, i32 n, i32 k,
                                                                                const T* a, const T* b, const float* bias,
                                                                                Activation act, float* c);
/// \brief matmul with c in the operands' type: c[m, n] = (T) act(a b + bias[n]), rounded to
/// nearest even from the float accumulators, so that a chain of layers (an MLP) needs no cast
/// kernel between them. T = __half or __nv_bfloat16.
template <class T>
KernelNode<i32, i32, i32, const T*, const T*, const float*, i32, T*> matmul_cast(Into g, std::string name, i32 m, i32 n, i32 k,
                                                                                 const T* a, const T* b, const float* bias,
                                                                                 Activation act, T* c);

/// \brief y[m, n] = x[m, k] w[n, k]^T: a linear layer with its weights as Hugging Face and PyTorch
/// keep them ([out, in], row-major), float accumulation, y rounded to T. For the small batches
/// of decoding (m up to about 16), where it is bound by reading w once. bf16 and f16 with m > 1,
/// k a multiple of 32 and x and w 16-byte aligned run on the tensor cores, 16 rows of x a pass;
/// otherwise a warp a weight row, 8 rows of x a pass. Each pass re-reads w: for larger m,
/// cublaslt_linear (flowdsl/cublaslt.hpp).
template <class T>
KernelNode<i32, i32, i32, const T*, const T*, T*> linear(Into g, std::string name, i32 m, i32 n, i32 k, const T* x, const T* w,
                                                         T* y);
/// \brief linear of silu(gate) * up: gate_up is [m, 2k], each row the gate projection's k
/// values then the up projection's (a SwiGLU MLP's fused projection), and y = (silu(gate) * up)
/// w^T, rounding silu and the product to T as a bf16 or f16 model does. The down projection of a
/// Llama MLP without writing its activation out.
template <class T>
KernelNode<i32, i32, i32, const T*, const T*, T*> linear_gated(Into g, std::string name, i32 m, i32 n, i32 k, const T* gate_up,
                                                               const T* w, T* y);
template <class T>
using LinearNormNode = KernelNode<i32, i32, i32, float, const T*, const T*, const T*, T*>;
/// \brief linear of rms_norm(x) · norm_weight, rounded as Llama's RMSNorm rounds (see rms_norm):
/// the norm before a decoder's projection, each block computing the rows' scales itself, so the
/// normalised rows are never written out.
template <class T>
LinearNormNode<T> linear_norm(Into g, std::string name, i32 m, i32 n, i32 k, float eps, const T* x, const T* norm_weight,
                              const T* w, T* y);
/// \brief linear added into y: y = T(y + T(x w^T)), a projection's output into a decoder's
/// residual stream as the model rounds it (the product, then the sum).
template <class T>
KernelNode<i32, i32, i32, const T*, const T*, T*> linear_residual(Into g, std::string name, i32 m, i32 n, i32 k, const T* x,
                                                                  const T* w, T* y);
/// \brief linear_gated added into y, as linear_residual adds.
template <class T>
KernelNode<i32, i32, i32, const T*, const T*, T*> linear_gated_residual(Into g, std::string name, i32 m, i32 n, i32 k,
                                                                        const T* gate_up, const T* w, T* y);

// ---------------------------------------------------------------- conditions -----------------
//
// Kernels that set a conditional node's value (flowdsl/kinds/conditional.hpp) from a value on
// the device, so that the graph decides without a copy to the host: one block of 32 threads, of
// which one sets the condition. Declare them where CUDA allows the setter: in the conditional
// node's body (a WHILE's must be there) or in the body holding the node, ahead of it.

/// \brief cond = 1 when value[0] > threshold, else 0 (NaN: 0). For a WHILE that iterates while a
/// residual is above a tolerance, or an IF on a statistic.
KernelNode<const float*, float, Condition> condition_greater(Into g, std::string name, const float* value, float threshold,
                                                             Condition cond);
/// \brief cond = 1 when value[0] < threshold, else 0 (NaN: 0).
KernelNode<const float*, float, Condition> condition_less(Into g, std::string name, const float* value, float threshold,
                                                          Condition cond);
/// \brief cond = value[0] - lower when lower <= value[0] <= upper, else upper - lower + 1: a
/// SWITCH of upper - lower + 1 cases runs case value[0] - lower, or none for a value out of
/// range. (For an empty range, lower > upper, or one of 2^32 - 1 values or more, out of range
/// sets 0xFFFFFFFF.)
KernelNode<const i32*, i32, i32, Condition> condition_case(Into g, std::string name, const i32* value, i32 lower, i32 upper,
                                                           Condition cond);
/// \brief cond = the power-of-two bucket of count[0]: the smallest b with 2^b >= count[0] (0 for
/// count[0] <= 1), at most cases - 1 (0 when cases < 1). With a SWITCH of 8 cases whose case b
/// handles a batch padded to 2^b: counts 1, 2, 3..4, 5..8, ..., 65..128 and above pick 0 .. 7.
KernelNode<const i32*, i32, Condition> condition_bucket(Into g, std::string name, const i32* count, i32 cases, Condition cond);
/// \brief counter[0] += 1: declared in a body, it counts how often that body ran, for the host to
/// read after the launch: a WHILE's iterations (in its body), the case a SWITCH took (one
/// counter element per case). Zero the counter first (a memset node ahead of the conditional
/// node, or once before launches that add up).
KernelNode<i32*> count(Into g, std::string name, i32* counter);

/// \brief Ahead of a decode loop (a WHILE whose body is a decode step, then decode_loop_step):
/// step[0] = 0, and `loop` = 1 when steps > 0 and a sequence has tokens remaining
/// (remaining[b] > 0), else 0. Declare the WHILE with ConditionDefault{0} and this kernel before
/// it. One block. Registered as "decode_loop.begin.i32".
KernelNode<i32, i32, const i32*, i32*, Condition> decode_loop_begin(Into g, std::string name, i32 sequences, i32 steps,
                                                                    const i32* remaining, i32* step, Condition loop);
/// \brief The last node of a decode loop's body, after the step's argmax (or sampler) wrote each
/// sequence's next token into tokens[b]. A sequence with tokens remaining takes it:
/// out[b * steps + step[0]] = tokens[b], positions[b] += 1, remaining[b] -= 1, or 0 when the token
/// is end_token (a negative end_token matches none); one without writes -1 there and its position
/// stays (the step still computes its row: its cache write lands on its own next slot, or on none
/// past its pages). Then step[0] += 1, and `loop` = 1 while a sequence has tokens remaining and
/// fewer than `steps` steps ran. The host reads out (and remaining) after the launch: up to
/// `steps` tokens a sequence for one launch, in the columns before step[0]. One block; a step[0]
/// outside 0 .. steps - 1 changes nothing and ends the loop. Registered as "decode_loop.step.i32".
KernelNode<i32, i32, i32, const i32*, i32*, i32*, i32*, i32*, Condition> decode_loop_step(
    Into g, std::string name, i32 sequences, i32 steps, i32 end_token, const i32* tokens, i32* positions, i32* remaining,
    i32* out, i32* step, Condition loop);

// ---------------------------------------------------------------- registry -------------------

/// \brief Registers every built-in kernel under a stable name ("axpy.f32", "cast.f32.bf16",
/// "softmax.bf16", "matmul.f16", ...) with named parameters.
/// \throws UsageError when a name is taken already (e.g. called twice on one registry).
void register_builtins(KernelRegistry& registry);

/// \brief register_builtins() unless `registry` holds the built-in kernels already: safe to call
/// from every part of a program that needs them, from any thread. KernelRegistry::global() is
/// where fusion, typed launchers' checks and graph files look for them.
/// \throws UsageError when some built-in names are taken by other kernels.
void ensure_builtins(KernelRegistry& registry = KernelRegistry::global());

}  // namespace flowdsl::kernels
