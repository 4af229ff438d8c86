// SPDX-License-Identifier: Apache-2.0
// Descriptors and launchers of the matrix multiply, and the tensor maps of its Hopper path.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "../descriptor.cuh"
#include "matmul_wgmma.cuh"

namespace flowdsl::kernels {
namespace detail {
namespace {

/// cuTensorMapEncodeTiled from the driver, looked up once (null when the driver lacks it); the
/// library does not link libcuda.
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                                 const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
EncodeTiled encode_tiled() noexcept {
  static const EncodeTiled function = []() noexcept -> EncodeTiled {
    void* found = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &found, 12000, cudaEnableDefault, &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();  // the matmul takes its generic path; leave no error for the caller's next check
      return nullptr;
    }
    return reinterpret_cast<EncodeTiled>(found);
  }();
  return function;
}

/// The map of a row-major [rows, cols] matrix of T read in boxes of [box_rows, box_cols], 128-byte swizzled.
template <class T>
bool encode(std::uint64_t (&out)[16], EncodeTiled encode, const void* base, std::int32_t rows, std::int32_t cols,
            std::uint32_t box_rows, std::uint32_t box_cols) noexcept {
  static_assert(sizeof(T) == 2, "the Hopper matmul reads 16-bit operands");
  const CUtensorMapDataType type = std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * sizeof(T)};  // bytes between rows
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  CUtensorMap map;
  const CUresult result = encode(&map, type, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // NONE: out-of-bounds elements read as zeros
  std::memcpy(out, &map, sizeof map);
  return result == CUDA_SUCCESS;
}

/// DerivedParameters::compute of the Hopper matmul: the tensor maps of a and b from the
/// arguments (m, n, k, a, b, ...). Never throws: whatever cannot be encoded leaves valid = 0.
template <class T>
void encode_matmul_maps(const void* const* args, void* out) noexcept {
  std::int32_t m, n, k;
  const void* a;
  const void* b;
  std::memcpy(&m, args[0], sizeof m);
  std::memcpy(&n, args[1], sizeof n);
  std::memcpy(&k, args[2], sizeof k);
  std::memcpy(&a, args[3], sizeof a);
  std::memcpy(&b, args[4], sizeof b);
  MatmulMaps maps{};
  // The copy engine wants 16-byte-aligned bases and rows (k, n multiples of 8 elements).
  const auto aligned16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const bool usable = m > 0 && n > 0 && k > 0 && k % 8 == 0 && n % 8 == 0 && a != nullptr && b != nullptr && aligned16(a) &&
                      aligned16(b);
  const EncodeTiled function = usable ? encode_tiled() : nullptr;
  if (function != nullptr) {
    maps.valid = encode<T>(maps.a, function, a, m, k, a_box_rows(m), wg::bk) &&
                         encode<T>(maps.b, function, b, k, n, wg::bk, wg::box_n)
                     ? 1
                     : 0;
  }
  std::memcpy(out, &maps, sizeof maps);
}

/// Dynamic shared memory for the Hopper kernel: its stages where the device allows them, else
/// what the generic path needs (the kernel checks which it got). Without a device, the stages.
template <class T>
std::uint32_t wgmma_shared_bytes() {
  int device = 0, limit = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return wg::shared_bytes;
  }
  return static_cast<std::uint32_t>(limit >= wg::shared_bytes ? wg::shared_bytes : matmul_fallback_shared_bytes<T>());
}

/// The most clusters of `size` blocks (along z) of the Hopper kernel that the current device runs
/// at once, asked of CUDA once per device and size; 0 when it cannot say (no device). A cluster's
/// blocks share a GPC, so on an H200 30 clusters of 4 fit, not 33.
int max_active_clusters(int size) {
  static std::atomic<int> known[16][9] = {};  // per device and size: the answer + 1; 0: not asked yet
  int device = 0;
  if (size < 1 || size > 8 || cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 16) {
    (void)cudaGetLastError();
    return 0;
  }
  if (const int cached = known[device][size].load(std::memory_order_relaxed); cached > 0) return cached - 1;
  const auto kernel = matmul_wgmma_kernel<__nv_bfloat16, float>;  // every instance has its resources
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 1;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = static_cast<unsigned>(size);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(1, 1, static_cast<unsigned>(size));
  config.blockDim = dim3(wg::threads);
  config.dynamicSmemBytes = wg::shared_bytes;
  config.attrs = &cluster;
  config.numAttrs = 1;
  int clusters = 0;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wg::shared_bytes) != cudaSuccess ||
      cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();
    clusters = 0;
  }
  known[device][size].store(clusters + 1, std::memory_order_relaxed);
  return clusters;
}

/// The launch of the Hopper kernel for an m x n x k product. Wide tiles (128 x 256) where they
/// give the device a block per multiprocessor or more; else narrow ones (128 x 128 or 128 x 64)
/// and k split across the blocks of a cluster along z (up to 8), picking the pair that puts the
/// most blocks on the multiprocessors in one wave (one block fits a multiprocessor, and no more
/// clusters than the device runs at once) while each block keeps two k-tiles of 64 or more: the
/// small-batch shapes of inference (16 rows by a 4096 x 1024 weight: 128 blocks, not 16).
LaunchShape wgmma_shape(i32 m, i32 n, i32 k, std::uint32_t shared_bytes) {
  const std::int64_t sms = multiprocessors();
  const std::int64_t row_tiles = blocks_for(m, wg::bm), k_tiles = (std::max<i32>(k, 0) + wg::bk - 1) / wg::bk;
  const std::int64_t wide = blocks_for(n, wg::bn) * row_tiles;
  LaunchShape shape{Dim3(blocks_for(n, wg::bn), blocks_for(m, wg::bm)), wg::threads, shared_bytes};
  if (wide >= sms || shared_bytes < static_cast<std::uint32_t>(wg::shared_bytes)) return shape;
  std::int64_t best = wide, best_split = 1;
  for (const int bn : {128, 64}) {
    const std::int64_t tiles = blocks_for(n, bn) * row_tiles;
    if (tiles > sms) continue;  // a second wave of narrow tiles
    std::int64_t split = std::max<std::int64_t>(1, std::min<std::int64_t>({8, sms / tiles, k_tiles / 2}));
    // Each tile is a cluster: more of them than run at once would make a second wave.
    for (int fits; split > 1 && (fits = max_active_clusters(static_cast<int>(split))) > 0 && tiles > fits;) --split;
    // The most blocks; between as many, the shorter split (its reduction costs a cluster barrier
    // and a pass over distributed shared memory: 1024^3 runs 0.83 of cuBLAS in 128 blocks of 64
    // columns, 0.66 in 64 tiles of 128 split in two).
    if (tiles * split > best || (tiles * split == best && split < best_split)) {
      best = tiles * split;
      best_split = split;
      shape.grid = Dim3(blocks_for(n, bn), blocks_for(m, wg::bm), static_cast<std::uint32_t>(split));
      shape.cluster = Dim3(1, 1, static_cast<std::uint32_t>(split));
    }
  }
  return shape;
}

/// f16 and bf16 on the Hopper kernel (c in float or, for the cast variant, in T), f32 on FMA units.
template <class T>
auto matmul_function() {
  if constexpr (std::is_same_v<T, float>) {
    return matmul_float_kernel;
  } else {
    return matmul_wgmma_kernel<T, float>;
  }
}
/// A block per output tile, no striding; the f16/bf16 kernel runs with up to its 384 threads
/// (fewer take a slower path), the f32 one with its 256 only.
struct ByTile : Descriptor {
  static constexpr bool grid_strides = false;
  template <class T>
  static constexpr bool block_exact() {
    return std::is_same_v<T, float>;
  }
  template <class T, class... A>
  static LaunchShape shape(i32 m, i32 n, i32 k, const A&...) {
    if constexpr (std::is_same_v<T, float>) {
      return {Dim3(blocks_for(n, mmf::bn), blocks_for(m, mmf::bm)), mmf::threads};
    } else {
      return wgmma_shape(m, n, k, wgmma_shared_bytes<T>());
    }
  }
  /// The wide tiles' grid, which computes the whole product whatever the rule chose (the kernel
  /// takes the tile width the grid was made for, and only the blocks of z = 0 work unsplit).
  static constexpr bool has_least_grid = true;
  template <class T, class... A>
  static Dim3 least_grid(i32 m, i32 n, const A&...) {
    if constexpr (std::is_same_v<T, float>) {
      return Dim3(blocks_for(n, mmf::bn), blocks_for(m, mmf::bm));
    } else {
      return Dim3(blocks_for(n, wg::bn), blocks_for(m, wg::bm));
    }
  }
  template <class T>
  static DerivedParameters derived() {
    return {encode_matmul_maps<T>, sizeof(MatmulMaps), alignof(MatmulMaps)};
  }
};
struct CastByTile : ByTile {
  using instances = Instances<Types<__half>, Types<__nv_bfloat16>>;
  static constexpr const char* variant = ".cast";
};
FLOWDSL_KERNEL(Matmul, ByTile, "matmul",
               "c[m, n] = act(a[m, k] b[k, n] + bias[n]), float accumulate; f16, bf16 on tensor cores, f32 on FMA units",
               matmul_function<T...>(), "m", "n", "k", "a: m * k", "b: k * n", "bias: n", "activation: " FLOWDSL_ACTIVATION_NAMES, "c: m * n")
FLOWDSL_KERNEL(MatmulCast, CastByTile, "matmul",
               "c[m, n] = act(a[m, k] b[k, n] + bias[n]) rounded to the type of a and b, float accumulate, tensor cores",
               (matmul_wgmma_kernel<T..., T...>), "m", "n", "k", "a: m * k", "b: k * n", "bias: n", "activation: " FLOWDSL_ACTIVATION_NAMES, "c: m * n")
}  // namespace

void register_matmul(KernelRegistry& registry) { register_kernels<void, Matmul, MatmulCast>(registry); }
}  // namespace detail

template <class T>
KernelNode<i32, i32, i32, const T*, const T*, const float*, i32, float*> matmul(Into g, std::string name, i32 m, i32 n, i32 k,
                                                                                const T* a, const T* b, const float* bias,
                                                                                Activation act, float* c) {
  return detail::declare<detail::Matmul, T>(g, std::move(name), m, n, k, a, b, bias, static_cast<i32>(act), c);
}
template <class T>
KernelNode<i32, i32, i32, const T*, const T*, const float*, i32, T*> matmul_cast(Into g, std::string name, i32 m, i32 n, i32 k,
                                                                                 const T* a, const T* b, const float* bias,
                                                                                 Activation act, T* c) {
  return detail::declare<detail::MatmulCast, T>(g, std::move(name), m, n, k, a, b, bias, static_cast<i32>(act), c);
}

FLOWDSL_INSTANTIATE_FLOAT_TYPES(matmul)
FLOWDSL_INSTANTIATE(matmul_cast, __half)
FLOWDSL_INSTANTIATE(matmul_cast, __nv_bfloat16)

}  // namespace flowdsl::kernels
