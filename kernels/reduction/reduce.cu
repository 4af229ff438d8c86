// SPDX-License-Identifier: Apache-2.0
// Descriptors and launchers of the reductions, softmax and layer normalisation.
#include "../descriptor.cuh"
#include "layer_norm.cuh"
#include "reduce.cuh"
#include "rms_norm.cuh"
#include "softmax.cuh"

namespace flowdsl::kernels {
namespace detail {

__global__ void __launch_bounds__(row_block) sum_finish_kernel(std::int32_t count, const double* partials,
                                                               std::int32_t take_sqrt, float* out) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  __shared__ typename cub::BlockReduce<double, row_block>::TempStorage temp;
  const double total = cub::BlockReduce<double, row_block>(temp).Sum(acc);
  if (threadIdx.x == 0) out[0] = static_cast<float>(take_sqrt ? sqrt(total) : total);
}

namespace {
/// Row kernels come as a warp per row (Block = 32, 8 rows a block) for short rows and a block
/// per row (Block = row_block) for long ones. Both are registered, as "<name>.warp.T" and
/// "<name>.T", and both are correct for any number of columns; the launchers pick by cols.
bool short_rows(i32 cols) { return cols <= warp_row_limit; }
template <int Block>
struct ByRow : Descriptor {
  static constexpr const char* variant = Block == 32 ? ".warp" : "";
  static constexpr const char* note = Block == 32 ? " (a warp per row)" : " (a block per row)";
  template <class... T, class... A>
  static LaunchShape shape(i32 rows, i32, const A&...) {
    return {blocks_for(rows, Block == 32 ? row_block / 32 : 1), row_block};
  }
};
/// Softmax and layer normalisation cache short rows in groups of warp_group_size(cols) lanes:
/// 32 / that many rows a warp.
template <int Block>
struct ByCachedRow : ByRow<Block> {
  template <class... T, class... A>
  static LaunchShape shape(i32 rows, i32 cols, const A&...) {
    return {blocks_for(rows, Block == 32 ? row_block / warp_group_size(cols) : 1), row_block};
  }
};

/// Layer normalisation as ByCachedRow, except that the block kernel gives 16-bit rows of up
/// to packed_row_limit columns a warp each (layer_norm_packed): row_block / 32 rows a block.
template <int Block>
struct ByNormRow : ByCachedRow<Block> {
  template <class T, class... A>
  static LaunchShape shape(i32 rows, i32 cols, const A&... args) {
    if (Block == row_block && sizeof(T) == 2 && cols <= packed_row_limit) return {blocks_for(rows, row_block / 32), row_block};
    return ByCachedRow<Block>::template shape<T>(rows, cols, args...);
  }
};

#define FLOWDSL_ROW_KERNELS(X)                                                                                              \
  X(RowSum, ByRow<Block>, "row_sum", "out[r] = sum of row r", (row_reduce_kernel<Block, T..., RowOp::sum>), "rows", "cols", \
    "x: rows * cols", "out: rows")                                                                                                             \
  X(RowMax, ByRow<Block>, "row_max", "out[r] = max of row r", (row_reduce_kernel<Block, T..., RowOp::max>), "rows", "cols", \
    "x: rows * cols", "out: rows")                                                                                                             \
  X(RowMean, ByRow<Block>, "row_mean", "out[r] = mean of row r", (row_reduce_kernel<Block, T..., RowOp::mean>), "rows",     \
    "cols", "x: rows * cols", "out: rows")                                                                                                     \
  X(RowArgmax, ByRow<Block>, "row_argmax", "out[r] = first index of the max of row r", (row_argmax_kernel<Block, T...>),  \
    "rows", "cols", "x: rows * cols", "out: rows")                                                                                             \
  X(RowArgmaxKey, ByRow<Block>, "row_argmax_key", "keys[r] = argmax key of row r (first index + first); max over ranks, argmax_key_token", \
    (row_argmax_key_kernel<Block, T...>), "rows", "cols", "first", "x: rows * cols", "keys: rows")                                           \
  X(Softmax, ByCachedRow<Block>, "softmax", "row-wise stable softmax", (softmax_kernel<Block, T...>), "rows", "cols", "x: rows * cols",  \
    "y: rows * cols")                                                                                                                    \
  X(LayerNorm, ByNormRow<Block>, "layer_norm", "row-wise layer normalisation", (layer_norm_kernel<Block, T...>), "rows",  \
    "cols", "eps", "x: rows * cols", "gamma: cols", "beta: cols", "y: rows * cols")
#define FLOWDSL_ROW_KERNEL(...) template <int Block> FLOWDSL_KERNEL(__VA_ARGS__)
FLOWDSL_ROW_KERNELS(FLOWDSL_ROW_KERNEL)
#undef FLOWDSL_ROW_KERNEL

/// The warp kernel of D for short rows, the block kernel for long ones.
template <template <int> class D, class T, class... A>
auto declare_by_row(Into g, std::string name, i32 rows, i32 cols, const A&... rest) {
  return short_rows(cols) ? declare<D<32>, T>(g, std::move(name), rows, cols, rest...)
                          : declare<D<row_block>, T>(g, std::move(name), rows, cols, rest...);
}

/// RMS normalisation: a block a row, striding over the rows.
struct ByBlockRow : Descriptor {
  template <class... T, class... A>
  static LaunchShape shape(i32 rows, const A&...) {
    return {blocks_for(rows, 1), row_block};
  }
};
#define FLOWDSL_RMS_KERNELS(X)                                                                                         \
  X(RmsNorm, ByBlockRow, "rms_norm", "y = T(T(x * rsqrt(mean(x^2) + eps)) * w), row-wise (Llama's RMSNorm)",           \
    rms_norm_kernel<T...>, "rows", "cols", "eps", "x: rows * cols", "w: cols", "y: rows * cols")                       \
  X(AddRmsNorm, ByBlockRow, "add_rms_norm", "residual = T(residual + x) in place, then y = rms_norm(residual)",         \
    add_rms_norm_kernel<T...>, "rows", "cols", "eps", "residual: rows * cols", "x: rows * cols", "w: cols",            \
    "y: rows * cols")
FLOWDSL_RMS_KERNELS(FLOWDSL_KERNEL)

/// The two-pass sum: partials from at most sum_max_partials blocks, then one block adds them.
template <class T>
std::uint32_t sum_blocks(i64 n) {
  return std::min<std::uint32_t>(blocks_for(n, std::int64_t{row_block} * (16 / sizeof(T)) * 2), sum_max_partials);
}
struct BySumBlocks : Descriptor {
  template <class T, class... A>
  static LaunchShape shape(i64 n, const A&...) {
    return {sum_blocks<T>(n), row_block};
  }
};
struct OneBlock : Descriptor {
  using instances = NoTypes;
  template <class... A>
  static LaunchShape shape(const A&...) {
    return {1, row_block};
  }
};
/// A thread a row.
struct ByRowThread : Descriptor {
  using instances = NoTypes;
  template <class... A>
  static LaunchShape shape(i32 rows, const A&...) {
    return {blocks_for(rows, row_block), row_block};
  }
};
#define FLOWDSL_KEY_KERNELS(X)                                                                                         \
  X(ArgmaxKeyToken, ByRowThread, "argmax_key_token", "out[r] = the index row_argmax_key's keys[r] holds (-1: empty)",  \
    argmax_key_token_kernel, "rows", "keys: rows", "out: rows")
FLOWDSL_KEY_KERNELS(FLOWDSL_KERNEL)

#define FLOWDSL_SUM_KERNELS(X)                                                                                         \
  X(SumPartial, BySumBlocks, "sum_partial", "partials[block] = sum of the block's grid-stride share of x (double)",    \
    sum_partial_kernel<T...>, "n", "x: n", "partials: grid.x")                                                                    \
  X(SumFinish, OneBlock, "sum_finish", "out[0] = sum of partials[0 .. count) (sqrt if take_sqrt); one block",          \
    sum_finish_kernel, "count", "partials: count", "take_sqrt", "out: 1")
FLOWDSL_SUM_KERNELS(FLOWDSL_KERNEL)
}  // namespace

KernelNode<i32, const double*, i32, float*> declare_sum_finish(Into g, std::string name, i32 count, const double* partials,
                                                               bool take_sqrt, float* out) {
  return declare<SumFinish>(g, std::move(name), count, partials, take_sqrt ? 1 : 0, out);
}

void register_reductions(KernelRegistry& registry) {
#define FLOWDSL_BOTH_BLOCKS(Desc, ...) , Desc<32>, Desc<row_block>
  register_kernels<void FLOWDSL_ROW_KERNELS(FLOWDSL_BOTH_BLOCKS)>(registry);
#undef FLOWDSL_BOTH_BLOCKS
  FLOWDSL_REGISTER_LIST(registry, FLOWDSL_KEY_KERNELS);
  FLOWDSL_REGISTER_LIST(registry, FLOWDSL_SUM_KERNELS);
  FLOWDSL_REGISTER_LIST(registry, FLOWDSL_RMS_KERNELS);
}
}  // namespace detail

template <class T>
KernelNode<i32, i32, const T*, float*> row_sum(Into g, std::string name, i32 rows, i32 cols, const T* x, float* out) {
  return detail::declare_by_row<detail::RowSum, T>(g, std::move(name), rows, cols, x, out);
}
template <class T>
KernelNode<i32, i32, const T*, float*> row_max(Into g, std::string name, i32 rows, i32 cols, const T* x, float* out) {
  return detail::declare_by_row<detail::RowMax, T>(g, std::move(name), rows, cols, x, out);
}
template <class T>
KernelNode<i32, i32, const T*, float*> row_mean(Into g, std::string name, i32 rows, i32 cols, const T* x, float* out) {
  return detail::declare_by_row<detail::RowMean, T>(g, std::move(name), rows, cols, x, out);
}
template <class T>
KernelNode<i32, i32, const T*, i32*> row_argmax(Into g, std::string name, i32 rows, i32 cols, const T* x, i32* out) {
  return detail::declare_by_row<detail::RowArgmax, T>(g, std::move(name), rows, cols, x, out);
}
template <class T>
KernelNode<i32, i32, i32, const T*, u64*> row_argmax_key(Into g, std::string name, i32 rows, i32 cols, i32 first, const T* x,
                                                         u64* keys) {
  if (first < 0) {
    throw UsageError("flowdsl: node '" + name + "': first (" + std::to_string(first) + ") must not be negative");
  }
  return detail::declare_by_row<detail::RowArgmaxKey, T>(g, std::move(name), rows, cols, first, x, keys);
}
KernelNode<i32, const u64*, i32*> argmax_key_token(Into g, std::string name, i32 rows, const u64* keys, i32* out) {
  return detail::declare<detail::ArgmaxKeyToken>(g, std::move(name), rows, keys, out);
}
template <class T>
KernelNode<i32, i32, const T*, T*> softmax(Into g, std::string name, i32 rows, i32 cols, const T* x, T* y) {
  return detail::declare_by_row<detail::Softmax, T>(g, std::move(name), rows, cols, x, y);
}
template <class T>
KernelNode<i32, i32, float, const T*, const float*, const float*, T*> layer_norm(Into g, std::string name, i32 rows, i32 cols,
                                                                                 float eps, const T* x, const float* gamma,
                                                                                 const float* beta, T* y) {
  return detail::declare_by_row<detail::LayerNorm, T>(g, std::move(name), rows, cols, eps, x, gamma, beta, y);
}
template <class T>
KernelNode<i32, i32, float, const T*, const T*, T*> rms_norm(Into g, std::string name, i32 rows, i32 cols, float eps,
                                                             const T* x, const T* w, T* y) {
  return detail::declare<detail::RmsNorm, T>(g, std::move(name), rows, cols, eps, x, w, y);
}
template <class T>
KernelNode<i32, i32, float, T*, const T*, const T*, T*> add_rms_norm(Into g, std::string name, i32 rows, i32 cols, float eps,
                                                                     T* residual, const T* x, const T* w, T* y) {
  return detail::declare<detail::AddRmsNorm, T>(g, std::move(name), rows, cols, eps, residual, x, w, y);
}
template <class T>
SumNodes<T> sum(Into g, const std::string& name, i64 n, const T* x, double* partials, float* out) {
  auto partial = detail::declare<detail::SumPartial, T>(g, name + ".partial", n, x, partials);
  auto finish = detail::declare_sum_finish(g, name, static_cast<i32>(detail::sum_blocks<T>(n)), partials, false, out);
  finish.after(partial);
  return SumNodes<T>{partial, finish};
}

FLOWDSL_INSTANTIATE_FLOAT_TYPES(row_sum)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(row_max)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(row_mean)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(row_argmax)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(row_argmax_key)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(softmax)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(layer_norm)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(sum)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(rms_norm)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(add_rms_norm)

}  // namespace flowdsl::kernels
