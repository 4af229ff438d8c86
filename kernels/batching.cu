// Launchers and registration of pad, crop and gather.
#include "batching.cuh"
#include "launch.cuh"

namespace flowdsl::kernels {
namespace {
using detail::declare;
constexpr std::uint32_t block = 256;
/// crop: a thread per column, batching_rows rows a thread.
Dim3 crop_grid(i32 cols, i32 rows) {
  return Dim3(blocks_for(cols, block), std::min<std::uint32_t>(blocks_for(rows, detail::batching_rows), 65535));
}
/// pad and gather_rows: a thread per 16-byte chunk of a row (the kernels stride over the rest
/// when rows cannot be chunked), batching_rows rows a thread.
template <class T>
Dim3 chunked_grid(i32 cols, i32 rows) {
  const std::uint32_t rows_y = std::min<std::uint32_t>(blocks_for(rows, detail::batching_rows), 65535);
  return Dim3(blocks_for(std::max<i64>(1, cols / static_cast<i32>(16 / sizeof(T))), block), rows_y);
}
}  // namespace

template <class T>
KernelNode<i32, i32, float, const T*, const i32*, T*, u8*> pad(Graph& g, std::string name, i32 batch, i32 width, float pad_value,
                                                               const T* values, const i32* offsets, T* out, u8* mask) {
  return declare(g, std::move(name), detail::pad_kernel<T>, "pad", chunked_grid<T>(width, batch), block)
      .args(batch, width, pad_value, values, offsets, out, mask);
}
template <class T>
KernelNode<i32, i32, float, const T*, const i32*, T*> crop(Graph& g, std::string name, i32 batch, i32 width, float pad_value,
                                                           const T* in, const i32* offsets, T* values) {
  return declare(g, std::move(name), detail::crop_kernel<T>, "crop", crop_grid(width, batch), block)
      .args(batch, width, pad_value, in, offsets, values);
}
template <class T>
KernelNode<i32, i32, const i32*, i32, const T*, T*> gather_rows(Graph& g, std::string name, i32 count, i32 cols, const i32* index,
                                                               i32 src_rows, const T* in, T* out) {
  return declare(g, std::move(name), detail::gather_rows_kernel<T>, "gather_rows", chunked_grid<T>(cols, count), block)
      .args(count, cols, index, src_rows, in, out);
}

#define FLOWDSL_INSTANTIATE(T)                                                                                        \
  template KernelNode<i32, i32, float, const T*, const i32*, T*, u8*> pad(Graph&, std::string, i32, i32, float,       \
                                                                          const T*, const i32*, T*, u8*);             \
  template KernelNode<i32, i32, float, const T*, const i32*, T*> crop(Graph&, std::string, i32, i32, float, const T*, \
                                                                      const i32*, T*);                                \
  template KernelNode<i32, i32, const i32*, i32, const T*, T*> gather_rows(Graph&, std::string, i32, i32, const i32*, \
                                                                          i32, const T*, T*);
FLOWDSL_FOR_EACH_FLOAT_TYPE(FLOWDSL_INSTANTIATE)
#undef FLOWDSL_INSTANTIATE

namespace detail {
namespace {
template <class T>
void register_typed(KernelRegistry& r) {
  const std::string s = std::string(".") + suffix<T>();
  r.add("pad" + s, pad_kernel<T>, {"batch", "width", "pad_value", "values", "offsets", "out", "mask"},
        "pad rows values[offsets[b] .. offsets[b+1]) into [batch, width] with a validity mask");
  r.add("crop" + s, crop_kernel<T>, {"batch", "width", "pad_value", "in", "offsets", "values"},
        "inverse of pad: rows of [batch, width] back to values[offsets[b] ..]");
  r.add("gather_rows" + s, gather_rows_kernel<T>, {"count", "cols", "index", "src_rows", "in", "out"},
        "out[r, :] = in[index[r], :] (zeros for an index out of range)");
}
}  // namespace
void register_batching(KernelRegistry& r) {
  register_typed<float>(r);
  register_typed<__half>(r);
  register_typed<__nv_bfloat16>(r);
}
}  // namespace detail

}  // namespace flowdsl::kernels
