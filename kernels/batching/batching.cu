// SPDX-License-Identifier: Apache-2.0
// Descriptors and launchers of pad, crop and gather.
#include "batching.cuh"
#include "../descriptor.cuh"

namespace flowdsl::kernels {
namespace detail {
namespace {
constexpr std::uint32_t batching_block = 256;
std::uint32_t row_blocks(i32 rows) { return std::min<std::uint32_t>(blocks_for(rows, batching_rows), 65535); }

/// A thread per 16-byte chunk of a row (pad and gather_rows stride over the rest when rows
/// cannot be chunked; crop strides over a row's output vectors), batching_rows rows a thread.
struct ByChunk : Descriptor {
  template <class T, class... A>
  static LaunchShape shape(i32 rows, i32 cols, const A&...) {
    return {Dim3(blocks_for(std::max<i64>(1, cols / static_cast<i32>(16 / sizeof(T))), batching_block), row_blocks(rows)),
            batching_block};
  }
};

#define FLOWDSL_BATCHING_KERNELS(X)                                                                                    \
  X(Pad, ByChunk, "pad", "pad rows values[offsets[b] .. offsets[b+1]) into [batch, width] with a validity mask",       \
    pad_kernel<T...>, "batch", "width", "pad_value", "values: offsets[batch]", "offsets: batch + 1", "out: batch * width", "mask: batch * width")                               \
  X(Crop, ByChunk, "crop", "inverse of pad: rows of [batch, width] back to values[offsets[b] ..]", crop_kernel<T...>, \
    "batch", "width", "pad_value", "in: batch * width", "offsets: batch + 1", "values: offsets[batch]")                                                          \
  X(GatherRows, ByChunk, "gather_rows", "out[r, :] = in[index[r], :] (zeros for an index out of range)",               \
    gather_rows_kernel<T...>, "count", "cols", "index: count", "src_rows", "in: src_rows * cols", "out: count * cols")  \
  X(GatherRowsFrom, ByChunk, "gather_rows_from",                                                                      \
    "out[r, :] = in[index[r] - first, :] (zeros for an index outside first .. first + src_rows)",                   \
    gather_rows_from_kernel<T...>, "count", "cols", "index: count", "first", "src_rows", "in: src_rows * cols",      \
    "out: count * cols")
FLOWDSL_BATCHING_KERNELS(FLOWDSL_KERNEL)
}  // namespace

void register_batching(KernelRegistry& registry) { FLOWDSL_REGISTER_LIST(registry, FLOWDSL_BATCHING_KERNELS); }
}  // namespace detail

template <class T>
KernelNode<i32, i32, float, const T*, const i32*, T*, u8*> pad(Into g, std::string name, i32 batch, i32 width, float pad_value,
                                                               const T* values, const i32* offsets, T* out, u8* mask) {
  return detail::declare<detail::Pad, T>(g, std::move(name), batch, width, pad_value, values, offsets, out, mask);
}
template <class T>
KernelNode<i32, i32, float, const T*, const i32*, T*> crop(Into g, std::string name, i32 batch, i32 width, float pad_value,
                                                           const T* in, const i32* offsets, T* values) {
  return detail::declare<detail::Crop, T>(g, std::move(name), batch, width, pad_value, in, offsets, values);
}
template <class T>
KernelNode<i32, i32, const i32*, i32, const T*, T*> gather_rows(Into g, std::string name, i32 count, i32 cols, const i32* index,
                                                               i32 src_rows, const T* in, T* out) {
  return detail::declare<detail::GatherRows, T>(g, std::move(name), count, cols, index, src_rows, in, out);
}

template <class T>
KernelNode<i32, i32, const i32*, i32, i32, const T*, T*> gather_rows_from(Into g, std::string name, i32 count, i32 cols,
                                                                         const i32* index, i32 first, i32 src_rows,
                                                                         const T* in, T* out) {
  return detail::declare<detail::GatherRowsFrom, T>(g, std::move(name), count, cols, index, first, src_rows, in, out);
}

FLOWDSL_INSTANTIATE_FLOAT_TYPES(pad)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(crop)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(gather_rows)
FLOWDSL_INSTANTIATE_FLOAT_TYPES(gather_rows_from)

}  // namespace flowdsl::kernels
