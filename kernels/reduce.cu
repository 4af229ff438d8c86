// Launchers and registration of the reductions, softmax and layer normalisation.
#include "launch.cuh"
#include "layer_norm.cuh"
#include "reduce.cuh"
#include "softmax.cuh"

namespace flowdsl::kernels {
namespace detail {

__global__ void __launch_bounds__(row_block) sum_finish_kernel(std::int32_t count, const double* partials,
                                                               std::int32_t take_sqrt, float* out) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  __shared__ typename cub::BlockReduce<double, row_block>::TempStorage temp;
  const double total = cub::BlockReduce<double, row_block>(temp).Sum(acc);
  if (threadIdx.x == 0) out[0] = static_cast<float>(take_sqrt ? sqrt(total) : total);
}

KernelNode<i32, const double*, i32, float*> declare_sum_finish(Graph& g, std::string name, i32 count, const double* partials,
                                                               bool take_sqrt, float* out) {
  return declare(g, std::move(name), sum_finish_kernel, "sum_finish", 1, row_block).args(count, partials, take_sqrt ? 1 : 0, out);
}

namespace {
/// A warp per row for short rows (8 rows a block), a block per row for long ones.
bool short_rows(i32 cols) { return cols <= warp_row_limit; }
Dim3 row_grid(i32 rows, i32 cols) {
  return short_rows(cols) ? Dim3(blocks_for(rows, row_block / 32)) : Dim3(blocks_for(rows, 1));
}
/// Softmax and layer normalisation cache short rows in groups of warp_group_size(cols) lanes:
/// 32 / that many rows a warp.
Dim3 cached_row_grid(i32 rows, i32 cols) {
  return short_rows(cols) ? Dim3(blocks_for(rows, row_block / warp_group_size(cols))) : Dim3(blocks_for(rows, 1));
}
}  // namespace
}  // namespace detail

using detail::declare;
using detail::row_block;
using detail::cached_row_grid;
using detail::row_grid;
using detail::RowOp;
using detail::short_rows;

#define FLOWDSL_ROW_KERNEL(kernel, ...) (short_rows(cols) ? kernel<32, __VA_ARGS__> : kernel<row_block, __VA_ARGS__>)

template <class T>
KernelNode<i32, i32, const T*, float*> row_sum(Graph& g, std::string name, i32 rows, i32 cols, const T* x, float* out) {
  return declare(g, std::move(name), FLOWDSL_ROW_KERNEL(detail::row_reduce_kernel, T, RowOp::sum), "row_sum",
                 row_grid(rows, cols), row_block)
      .args(rows, cols, x, out);
}
template <class T>
KernelNode<i32, i32, const T*, float*> row_max(Graph& g, std::string name, i32 rows, i32 cols, const T* x, float* out) {
  return declare(g, std::move(name), FLOWDSL_ROW_KERNEL(detail::row_reduce_kernel, T, RowOp::max), "row_max",
                 row_grid(rows, cols), row_block)
      .args(rows, cols, x, out);
}
template <class T>
KernelNode<i32, i32, const T*, float*> row_mean(Graph& g, std::string name, i32 rows, i32 cols, const T* x, float* out) {
  return declare(g, std::move(name), FLOWDSL_ROW_KERNEL(detail::row_reduce_kernel, T, RowOp::mean), "row_mean",
                 row_grid(rows, cols), row_block)
      .args(rows, cols, x, out);
}
template <class T>
KernelNode<i32, i32, const T*, i32*> row_argmax(Graph& g, std::string name, i32 rows, i32 cols, const T* x, i32* out) {
  return declare(g, std::move(name), FLOWDSL_ROW_KERNEL(detail::row_argmax_kernel, T), "row_argmax", row_grid(rows, cols),
                 row_block)
      .args(rows, cols, x, out);
}
template <class T>
KernelNode<i32, i32, const T*, T*> softmax(Graph& g, std::string name, i32 rows, i32 cols, const T* x, T* y) {
  return declare(g, std::move(name), FLOWDSL_ROW_KERNEL(detail::softmax_kernel, T), "softmax", cached_row_grid(rows, cols),
                 row_block)
      .args(rows, cols, x, y);
}
template <class T>
KernelNode<i32, i32, float, const T*, const float*, const float*, T*> layer_norm(Graph& g, std::string name, i32 rows, i32 cols,
                                                                                 float eps, const T* x, const float* gamma,
                                                                                 const float* beta, T* y) {
  return declare(g, std::move(name), FLOWDSL_ROW_KERNEL(detail::layer_norm_kernel, T), "layer_norm",
                 cached_row_grid(rows, cols), row_block)
      .args(rows, cols, eps, x, gamma, beta, y);
}
#undef FLOWDSL_ROW_KERNEL

template <class T>
SumNodes<T> sum(Graph& g, const std::string& name, i64 n, const T* x, double* partials, float* out) {
  const std::uint32_t blocks = std::min<std::uint32_t>(blocks_for(n, std::int64_t{row_block} * (16 / sizeof(T)) * 2),
                                                       sum_max_partials);
  auto partial = declare(g, name + ".partial", detail::sum_partial_kernel<T>, "sum_partial", blocks, row_block).args(n, x, partials);
  auto finish = detail::declare_sum_finish(g, name, static_cast<i32>(blocks), partials, false, out);
  finish.after(partial);
  return SumNodes<T>{partial, finish};
}

#define FLOWDSL_INSTANTIATE(T)                                                                                     \
  template KernelNode<i32, i32, const T*, float*> row_sum(Graph&, std::string, i32, i32, const T*, float*);        \
  template KernelNode<i32, i32, const T*, float*> row_max(Graph&, std::string, i32, i32, const T*, float*);        \
  template KernelNode<i32, i32, const T*, float*> row_mean(Graph&, std::string, i32, i32, const T*, float*);       \
  template KernelNode<i32, i32, const T*, i32*> row_argmax(Graph&, std::string, i32, i32, const T*, i32*);         \
  template KernelNode<i32, i32, const T*, T*> softmax(Graph&, std::string, i32, i32, const T*, T*);                \
  template KernelNode<i32, i32, float, const T*, const float*, const float*, T*> layer_norm(                       \
      Graph&, std::string, i32, i32, float, const T*, const float*, const float*, T*);                             \
  template SumNodes<T> sum(Graph&, const std::string&, i64, const T*, double*, float*);
FLOWDSL_FOR_EACH_FLOAT_TYPE(FLOWDSL_INSTANTIATE)
#undef FLOWDSL_INSTANTIATE

namespace detail {
namespace {
// Registered under ".warp" (a warp per row, rows up to ~1024 columns run best) and plain
// (a block per row); both are correct for any number of columns.
template <class T>
void register_typed(KernelRegistry& r) {
  const std::string s = std::string(".") + suffix<T>();
  const std::vector<std::string> row_params = {"rows", "cols", "x", "out"};
  auto both = [&](const std::string& base, auto warp_kernel, auto block_kernel, std::vector<std::string> params,
                  const std::string& summary) {
    r.add(base + s, block_kernel, params, summary + " (a block per row)");
    r.add(base + ".warp" + s, warp_kernel, std::move(params), summary + " (a warp per row)");
  };
  both("row_sum", row_reduce_kernel<32, T, RowOp::sum>, row_reduce_kernel<row_block, T, RowOp::sum>, row_params,
       "out[r] = sum of row r");
  both("row_max", row_reduce_kernel<32, T, RowOp::max>, row_reduce_kernel<row_block, T, RowOp::max>, row_params,
       "out[r] = max of row r");
  both("row_mean", row_reduce_kernel<32, T, RowOp::mean>, row_reduce_kernel<row_block, T, RowOp::mean>, row_params,
       "out[r] = mean of row r");
  both("row_argmax", row_argmax_kernel<32, T>, row_argmax_kernel<row_block, T>, row_params,
       "out[r] = first index of the max of row r");
  both("softmax", softmax_kernel<32, T>, softmax_kernel<row_block, T>, {"rows", "cols", "x", "y"}, "row-wise stable softmax");
  both("layer_norm", layer_norm_kernel<32, T>, layer_norm_kernel<row_block, T>,
       {"rows", "cols", "eps", "x", "gamma", "beta", "y"}, "row-wise layer normalisation");
  r.add("sum_partial" + s, sum_partial_kernel<T>, {"n", "x", "partials"},
        "partials[block] = sum of the block's grid-stride share of x (double)");
}
}  // namespace

void register_reductions(KernelRegistry& r) {
  register_typed<float>(r);
  register_typed<__half>(r);
  register_typed<__nv_bfloat16>(r);
  r.add("sum_finish", sum_finish_kernel, {"count", "partials", "take_sqrt", "out"},
        "out[0] = sum of partials[0 .. count) (sqrt if take_sqrt); one block");
}
}  // namespace detail

}  // namespace flowdsl::kernels
