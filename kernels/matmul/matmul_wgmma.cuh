// SPDX-License-Identifier: Apache-2.0
// The Hopper matrix multiply: c = act(a b + bias) for half and bfloat16 operands, float
// accumulation, c in float or (the cast variant) in the operands' type.
//
// A block computes a 128 x 256 tile of c with 384 threads in three warpgroups. Warpgroup 0 is
// the producer: one thread issues the bulk tensor copies (TMA, cp.async.bulk.tensor) of the
// 128 x 64 tile of a and the 64 x 256 tile of b into one of `stages` shared-memory stages, each
// completing on that stage's "full" mbarrier; the copy engine zero-fills what lies past the
// edges of a or b. Warpgroups 1 and 2 are the consumers: each multiplies its 64 rows of the A
// tile by the B tile with four wgmma m64n256k16 per stage (A K-major, B N-major: the
// transpose bit, since b is row-major [k, n]), keeps the 64 x 256 float accumulators in
// registers (128 a thread), and hands the stage back on its "empty" mbarrier once the
// wgmma that read it has completed. setmaxnreg moves registers from the producer (40) to the
// consumers (232). Shared tiles use the 128-byte swizzle, which the copy engine writes and
// wgmma reads (rows of 64 elements, 128 bytes). The epilogue stages each consumer's 64 x 256
// floats in the (then free) stages, and stores rows of 16-byte vectors (4 elements of c),
// adding bias[n], applying the activation and converting on the way, with edge checks.
//
// The copies need tensor maps (MatmulMaps), encoded on the host from the arguments every time
// they reach CUDA (a derived kernel parameter, see matmul.cu). When they could not be encoded
// (a or b not 16-byte aligned, k or n not a multiple of 8, an empty matrix, no driver entry
// point), when the launch is not the kernel's own shape (384 threads, wg::shared_bytes of dynamic
// shared memory), or when the code was not built for sm_90a, the same launch takes the generic
// path instead: threads 0 .. 255 compute the tile as two 128 x 128 halves with mma_sync_tile
// (matmul.cuh); a launch with fewer threads or too little shared memory for that (a graph
// file's hand-written shape) computes plain dot products.
#pragma once

#include <cuda.h>  // CUtensorMap (a type only: the library does not link the driver)

#include <cooperative_groups.h>

#include "matmul.cuh"

namespace flowdsl::kernels::detail {

/// The tensor maps (CUtensorMap, 128 bytes each) of a (rows m, k contiguous) and b (rows k, n
/// contiguous); `valid` is 0 when they could not be encoded, and the kernel then takes its
/// generic path. Held as 64-byte-aligned words, which is what the copy engine requires of a map
/// in kernel parameters (CUtensorMap itself is declared 128-byte aligned).
struct alignas(64) MatmulMaps {
  alignas(64) std::uint64_t a[16];
  alignas(64) std::uint64_t b[16];
  std::uint32_t valid;
};
static_assert(sizeof(CUtensorMap) == sizeof(MatmulMaps::a), "a tensor map is 128 bytes");

namespace wg {
constexpr int bm = 128, bn = 256, bk = 64;
constexpr int stages = 4;
constexpr int threads = 384;                  // a producer warpgroup and two consumer warpgroups
constexpr int box_n = 64;                     // columns of b per copy: 128 bytes, the swizzle span
constexpr int a_bytes = bm * bk * 2;          // 16 KiB
constexpr int b_box_bytes = bk * box_n * 2;   // 8 KiB
constexpr int b_bytes = bk * bn * 2;          // 32 KiB: bn / box_n boxes
constexpr int stage_bytes = a_bytes + b_bytes;
constexpr int barrier_offset = stages * stage_bytes;
/// Dynamic shared memory of the tensor-core path: the stages, 2 mbarriers a stage, and 1 KiB to
/// align the stages to the 1024-byte period of the 128-byte swizzle.
constexpr int shared_bytes = barrier_offset + 2 * stages * 8 + 1024;
constexpr int c_stride = bn + 8;  // floats a row of the epilogue's staging tile: no bank conflicts
static_assert(2 * 64 * c_stride * 4 <= stages * stage_bytes, "the epilogue stages c in the operand stages");
constexpr int producer_registers = 40, consumer_registers = 232;  // 128 x 40 + 256 x 232 <= 65536
}  // namespace wg

/// Rows of a's boxes: 128 (a tile's rows), or for a product of at most 64 rows just its rows,
/// rounded up to 8 (the swizzle's period): the copy engine then moves no zeros for the rows past
/// m, whose stale shared memory only reaches rows of c that are never stored (a row of c reads
/// only its own row of a). The host encodes the map with it, the kernel expects its bytes.
__host__ __device__ constexpr int a_box_rows(std::int32_t m) { return m > 64 ? wg::bm : (m + 7) / 8 * 8; }

/// Dynamic shared memory of the generic path (two mma_sync_tile buffers are not needed: the halves run in turn).
template <class T>
constexpr int matmul_fallback_shared_bytes() {
  return MmaSyncShared::bytes<T>() + 128;
}

__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ std::uint32_t dynamic_shared_bytes() {
  std::uint32_t bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return bytes;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLOWDSL_MATMUL_WGMMA 1
__device__ __forceinline__ void mbarrier_init(std::uint32_t bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarrier_expect_bytes(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
/// Waits until the phase of parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbarrier_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
/// Copies the box at (x, y) (x the contiguous dimension) of `map` to shared `dst`; completes on `bar`.
__device__ __forceinline__ void tma_load_2d(std::uint32_t dst, const void* map, int x, int y, std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void prefetch_tensor_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}

/// A wgmma shared-memory matrix descriptor with the 128-byte swizzle. `leading`: the byte
/// offset between 128-byte-wide column blocks of an MN-major operand (unused for K-major);
/// `stride`: between groups of 8 rows of 128 bytes.
__device__ __forceinline__ std::uint64_t wgmma_descriptor(std::uint32_t address, std::uint32_t leading, std::uint32_t stride) {
  return static_cast<std::uint64_t>((address & 0x3FFFF) >> 4) | static_cast<std::uint64_t>((leading & 0x3FFFF) >> 4) << 16 |
         static_cast<std::uint64_t>((stride & 0x3FFFF) >> 4) << 32 | std::uint64_t{1} << 62;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}

/// The 128 accumulators of one wgmma m64n256k16 with float accumulation, d[0 .. 127].
#define FLOWDSL_WGMMA_OUTPUTS                                                                                    \
      "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),            \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),      \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),    \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),    \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),    \
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),    \
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),    \
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),    \
      "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),    \
      "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),    \
      "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),    \
      "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),    \
      "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
      "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
      "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
      "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

/// d[64 x 256] += A[64 x 16] B[16 x 256]; A K-major, B N-major (transposed), both from shared.
#define FLOWDSL_WGMMA_M64N256K16(type)                                                                           \
  asm volatile(                                                                                                  \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                                              \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." type "." type " {"                                          \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                     \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                           \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                           \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                           \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                           \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                           \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "               \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127 "            \
      "}, %128, %129, p, 1, 1, 0, 1;\n}\n"                                                                       \
      : FLOWDSL_WGMMA_OUTPUTS                                                                                    \
      : "l"(a_desc), "l"(b_desc), "r"(1))


template <class T>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], std::uint64_t a_desc, std::uint64_t b_desc) {
  if constexpr (std::is_same_v<T, __half>) {
    FLOWDSL_WGMMA_M64N256K16("f16");
  } else {
    FLOWDSL_WGMMA_M64N256K16("bf16");
  }
}
#undef FLOWDSL_WGMMA_M64N256K16
#undef FLOWDSL_WGMMA_OUTPUTS

/// d[64 x 128] += A[64 x 16] B[16 x 128] (the narrow tiles of the split path); operands as above.
template <class T>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], std::uint64_t a_desc, std::uint64_t b_desc) {
#define FLOWDSL_WGMMA_M64N128K16(type)                                                  \
  asm volatile(                                                                       \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                  \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." type "." type " {"                 \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "\
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "\
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "\
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63 "                                                                         \
      "}, %64, %65, p, 1, 1, 0, 1;\n}\n"                                          \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),\
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),\
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),\
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),\
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                                                                         \
      : "l"(a_desc), "l"(b_desc), "r"(1))
  if constexpr (std::is_same_v<T, __half>) {
    FLOWDSL_WGMMA_M64N128K16("f16");
  } else {
    FLOWDSL_WGMMA_M64N128K16("bf16");
  }
#undef FLOWDSL_WGMMA_M64N128K16
}

/// d[64 x 64] += A[64 x 16] B[16 x 64] (the narrow tiles of the split path); operands as above.
template <class T>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], std::uint64_t a_desc, std::uint64_t b_desc) {
#define FLOWDSL_WGMMA_M64N64K16(type)                                                  \
  asm volatile(                                                                       \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                  \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." type "." type " {"                 \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "\
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31 "                                                                         \
      "}, %32, %33, p, 1, 1, 0, 1;\n}\n"                                          \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                                                         \
      : "l"(a_desc), "l"(b_desc), "r"(1))
  if constexpr (std::is_same_v<T, __half>) {
    FLOWDSL_WGMMA_M64N64K16("f16");
  } else {
    FLOWDSL_WGMMA_M64N64K16("bf16");
  }
#undef FLOWDSL_WGMMA_M64N64K16
}

/// d[64 x N] += A[64 x 16] B[16 x N] with A M-major (transposed) and B K-major: the operands of
/// a product whose roles are swapped (c^T = b^T a^T: b's N-major boxes are A, a's rows are B), for
/// products of at most 64 rows, which then take wgmma's N side (16, 32 or 64) instead of filling
/// 64-row M sides mostly with rows past m. Accumulators as for any m64nNk16: d[4j + e] and
/// d[4j + 2 + e] at (M row 16 warp + lane / 4, and + 8; N column 8j + 2 (lane % 4) + e).
#define FLOWDSL_WGMMA_SWAPPED(shape, type, regs, operands, ...)                                           \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" operands ", 0;\n"                                     \
               "wgmma.mma_async.sync.aligned." shape ".f32." type "." type " {" regs "}, "                \
               "%" FLOWDSL_WGMMA_A ", %" FLOWDSL_WGMMA_B ", p, 1, 1, 1, 0;\n}\n"                         \
               : __VA_ARGS__                                                                            \
               : "l"(a_desc), "l"(b_desc), "r"(1))
template <class T, int N>
__device__ __forceinline__ void wgmma_swapped(float (&d)[N / 2], std::uint64_t a_desc, std::uint64_t b_desc) {
  static_assert(N == 16 || N == 32 || N == 64, "swapped products have 16, 32 or 64 columns");
  constexpr bool half = std::is_same_v<T, __half>;
  if constexpr (N == 16) {
#define FLOWDSL_WGMMA_A "8"
#define FLOWDSL_WGMMA_B "9"
#define FLOWDSL_D16 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
    if constexpr (half) {
      FLOWDSL_WGMMA_SWAPPED("m64n16k16", "f16", "%0, %1, %2, %3, %4, %5, %6, %7", "10", FLOWDSL_D16);
    } else {
      FLOWDSL_WGMMA_SWAPPED("m64n16k16", "bf16", "%0, %1, %2, %3, %4, %5, %6, %7", "10", FLOWDSL_D16);
    }
#undef FLOWDSL_WGMMA_A
#undef FLOWDSL_WGMMA_B
  } else if constexpr (N == 32) {
#define FLOWDSL_WGMMA_A "16"
#define FLOWDSL_WGMMA_B "17"
#define FLOWDSL_D32                                                                                                \
  FLOWDSL_D16, "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define FLOWDSL_R32 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
    if constexpr (half) {
      FLOWDSL_WGMMA_SWAPPED("m64n32k16", "f16", FLOWDSL_R32, "18", FLOWDSL_D32);
    } else {
      FLOWDSL_WGMMA_SWAPPED("m64n32k16", "bf16", FLOWDSL_R32, "18", FLOWDSL_D32);
    }
#undef FLOWDSL_WGMMA_A
#undef FLOWDSL_WGMMA_B
  } else {
#define FLOWDSL_WGMMA_A "32"
#define FLOWDSL_WGMMA_B "33"
#define FLOWDSL_D64                                                                                                \
  FLOWDSL_D32, "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),         \
      "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define FLOWDSL_R64 FLOWDSL_R32 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
    if constexpr (half) {
      FLOWDSL_WGMMA_SWAPPED("m64n64k16", "f16", FLOWDSL_R64, "34", FLOWDSL_D64);
    } else {
      FLOWDSL_WGMMA_SWAPPED("m64n64k16", "bf16", FLOWDSL_R64, "34", FLOWDSL_D64);
    }
#undef FLOWDSL_WGMMA_A
#undef FLOWDSL_WGMMA_B
#undef FLOWDSL_D64
#undef FLOWDSL_R64
  }
}
#undef FLOWDSL_D32
#undef FLOWDSL_R32
#undef FLOWDSL_D16
#undef FLOWDSL_WGMMA_SWAPPED

/// The tensor-core path: producer (warpgroup 0) and consumers (warpgroups 1 and 2) of one tile.
template <class T, class Out>
__device__ __forceinline__ void matmul_wgmma_tile(std::int32_t m, std::int32_t n, std::int32_t k, const float* bias,
                                                  std::int32_t act, Out* c, const MatmulMaps& maps, unsigned char* shared) {
  const std::uint32_t base = (shared_address(shared) + 1023) & ~1023u;  // the swizzle repeats every 1024 bytes
  const std::uint32_t full = base + wg::barrier_offset, empty = full + 8 * wg::stages;
  auto stage_a = [&](int s) { return base + s * wg::stage_bytes; };
  auto stage_b = [&](int s) { return base + s * wg::stage_bytes + wg::a_bytes; };
  const int row0 = blockIdx.y * wg::bm, col0 = blockIdx.x * wg::bn;
  const int tiles = (k + wg::bk - 1) / wg::bk;
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    prefetch_tensor_map(maps.a);
    prefetch_tensor_map(maps.b);
    for (int s = 0; s < wg::stages; ++s) {
      mbarrier_init(full + 8 * s, 1);      // the producer's arrive, plus the bytes of the copies
      mbarrier_init(empty + 8 * s, 256);   // every consumer thread
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // visible to the copy engine
  }
  __syncthreads();

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(wg::producer_registers));
    if (threadIdx.x == 0) {
      for (int t = 0; t < tiles; ++t) {
        const int s = t % wg::stages;
        if (t >= wg::stages) mbarrier_wait(empty + 8 * s, ((t / wg::stages) - 1) & 1);  // its last readers are done
        // Out-of-bounds boxes count in full, zero-filled; a's box holds a_box_rows(m) rows.
        mbarrier_expect_bytes(full + 8 * s, a_box_rows(m) * wg::bk * 2 + wg::b_bytes);
        const int k0 = t * wg::bk;
        tma_load_2d(stage_a(s), maps.a, k0, row0, full + 8 * s);
#pragma unroll
        for (int j = 0; j < wg::bn / wg::box_n; ++j) {
          tma_load_2d(stage_b(s) + j * wg::b_box_bytes, maps.b, col0 + j * wg::box_n, k0, full + 8 * s);
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(wg::consumer_registers));
    const int consumer = warpgroup - 1;  // rows 64 * consumer .. + 64 of the tile
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int t = 0; t < tiles; ++t) {
      const int s = t % wg::stages;
      mbarrier_wait(full + 8 * s, (t / wg::stages) & 1);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < wg::bk / 16; ++kk) {
        // A: K-major, rows of 128 bytes; 16 elements of k are 32 bytes along the row.
        const std::uint64_t a_desc = wgmma_descriptor(stage_a(s) + consumer * 64 * 128 + kk * 32, 16, 1024);
        // B: N-major, 16 rows of k are 2048 bytes down; 64-column boxes are b_box_bytes apart.
        const std::uint64_t b_desc = wgmma_descriptor(stage_b(s) + kk * 16 * 128, wg::b_box_bytes, 1024);
        wgmma_m64n256k16<T>(d, a_desc, b_desc);
      }
      wgmma_commit();
      wgmma_wait<1>();  // the previous stage's wgmma have read their operands
      if (t > 0) mbarrier_arrive(empty + 8 * ((t - 1) % wg::stages));
    }
    wgmma_wait<0>();

    // Through shared memory, so that the stores are whole rows of 16-byte vectors and the bias and
    // activation run in a loop, not unrolled 128 times: the stages are free once both consumers'
    // wgmma have completed (the other consumer may still be reading them until this barrier).
    asm volatile("bar.sync 1, 256;" ::: "memory");
    float* tile = reinterpret_cast<float*>(shared + (base - shared_address(shared))) + consumer * 64 * wg::c_stride;
    // Accumulator layout of m64nNk16: warp w of the warpgroup holds rows 16 w .. 16 w + 15; lane
    // l holds rows l / 4 and l / 4 + 8, columns 8 j + 2 (l % 4) and the next, in d[4 j .. 4 j + 3].
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int r_top = warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int col = 8 * j + 2 * (lane % 4);
      *reinterpret_cast<float2*>(tile + r_top * wg::c_stride + col) = make_float2(d[4 * j], d[4 * j + 1]);
      *reinterpret_cast<float2*>(tile + (r_top + 8) * wg::c_stride + col) = make_float2(d[4 * j + 2], d[4 * j + 3]);
    }
    asm volatile("bar.sync 1, 256;" ::: "memory");  // the rows are in shared memory
    const bool vectors = n % 4 == 0 && aligned<4 * sizeof(Out)>(c);
    const int t = threadIdx.x % 128;
    for (int i = 0; i < 64 * wg::bn / 4 / 128; ++i) {
      const int e = (i * 128 + t) * 4, r = e / wg::bn, col = e % wg::bn;
      const int grow = row0 + consumer * 64 + r, gcol = col0 + col;
      if (grow >= m || gcol >= n) continue;
      const float4 v = *reinterpret_cast<const float4*>(tile + r * wg::c_stride + col);
      float out[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) out[q] = activate(act, out[q] + (bias != nullptr && gcol + q < n ? bias[gcol + q] : 0.0f));
      Out* p = c + static_cast<std::int64_t>(grow) * n + gcol;
      if (vectors && gcol + 3 < n) {
        Vec<Out, 4> w;
#pragma unroll
        for (int q = 0; q < 4; ++q) w.v[q] = from_float<Out>(out[q]);
        *reinterpret_cast<Vec<Out, 4>*>(p) = w;
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if (gcol + q < n) p[q] = from_float<Out>(out[q]);
        }
      }
    }
  }
}

namespace sk {
/// Stages of the narrow path: as many as fit where the wide path keeps four (wg::shared_bytes).
template <int BN>
constexpr int stage_bytes = wg::a_bytes + BN / wg::box_n * wg::b_box_bytes;
template <int BN>
constexpr int stages = (wg::barrier_offset / stage_bytes<BN>) < 8 ? (wg::barrier_offset / stage_bytes<BN>) : 8;
template <int BN>
constexpr int c_stride = BN + 4;  // floats a row of the staged partial tile: float4 rows, few bank conflicts
static_assert(stages<128> == 6 && stages<64> == 8, "the narrow path's stages fit the wide path's shared memory");
static_assert(2 * 64 * c_stride<128> * 4 <= wg::barrier_offset, "the partial tile is staged in the operand stages");
}  // namespace sk

/// The narrow, split path: the block computes a 128 x BN tile of c (BN 128 or 64) over k-tiles
/// [first, last) of k, with the producer / consumer scheme of matmul_wgmma_tile. With `split`
/// blocks in its cluster (along z), each computes a share of k: the partial tiles are staged in
/// each block's shared memory, and after a cluster barrier every block reduces its share of the
/// tile's elements across the cluster's blocks (distributed shared memory), adds the bias,
/// applies the activation and stores. `split` 1: the block's own tile alone.
/// `Swap` 16, 32 or 64 (a product of at most that many rows): the operands' roles are swapped
/// (wgmma_swapped), each consumer computing the product's rows for 64 of the tile's columns: a
/// 64-row M side then holds no rows past m, which the tensor cores would multiply for nothing.
template <class T, class Out, int BN, int Swap = 0>
__device__ __forceinline__ void matmul_narrow_tile(std::int32_t m, std::int32_t n, std::int32_t k, const float* bias,
                                                   std::int32_t act, Out* c, const MatmulMaps& maps, unsigned char* shared,
                                                   int split) {
  namespace cg = cooperative_groups;
  constexpr int stages = sk::stages<BN>, stage_bytes = sk::stage_bytes<BN>, c_stride = sk::c_stride<BN>;
  // Warpgroups that consume the stages: both, or with swapped operands one per box of b.
  constexpr int consumers = Swap > 0 ? BN / wg::box_n : 2;
  const std::uint32_t base = (shared_address(shared) + 1023) & ~1023u;
  const std::uint32_t full = base + stages * stage_bytes, empty = full + 8 * stages;
  auto stage_a = [&](int s) { return base + s * stage_bytes; };
  auto stage_b = [&](int s) { return base + s * stage_bytes + wg::a_bytes; };
  const int row0 = blockIdx.y * wg::bm, col0 = blockIdx.x * BN;
  const int rank = split > 1 ? static_cast<int>(blockIdx.z) : 0;  // the cluster spans the grid's z
  const int k_tiles = (k + wg::bk - 1) / wg::bk;
  const int first = static_cast<int>(static_cast<std::int64_t>(k_tiles) * rank / split);
  const int last = static_cast<int>(static_cast<std::int64_t>(k_tiles) * (rank + 1) / split);
  const int tiles = last - first;
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    prefetch_tensor_map(maps.a);
    prefetch_tensor_map(maps.b);
    for (int s = 0; s < stages; ++s) {
      mbarrier_init(full + 8 * s, 1);
      mbarrier_init(empty + 8 * s, 128 * consumers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  constexpr int accumulators = Swap > 0 ? Swap / 2 : BN / 2;
  float d[accumulators];
#pragma unroll
  for (int i = 0; i < accumulators; ++i) d[i] = 0.0f;
  if (warpgroup == 0) {
    if (threadIdx.x == 0) {
      for (int t = 0; t < tiles; ++t) {
        const int s = t % stages;
        if (t >= stages) mbarrier_wait(empty + 8 * s, ((t / stages) - 1) & 1);
        mbarrier_expect_bytes(full + 8 * s, a_box_rows(m) * wg::bk * 2 + stage_bytes - wg::a_bytes);
        const int k0 = (first + t) * wg::bk;
        tma_load_2d(stage_a(s), maps.a, k0, row0, full + 8 * s);
#pragma unroll
        for (int j = 0; j < BN / wg::box_n; ++j) {
          tma_load_2d(stage_b(s) + j * wg::b_box_bytes, maps.b, col0 + j * wg::box_n, k0, full + 8 * s);
        }
      }
    }
  } else if (warpgroup - 1 < consumers) {
    const int consumer = warpgroup - 1;
    for (int t = 0; t < tiles; ++t) {
      const int s = t % stages;
      mbarrier_wait(full + 8 * s, (t / stages) & 1);
      // Rows past m are zeros or stale (past a_box_rows): they reach only rows of c never stored.
      // A consumer wholly past m multiplies them rather than branch around the wgmma, which the
      // compiler would then fence.
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < wg::bk / 16; ++kk) {
        if constexpr (Swap > 0) {
          // A: the consumer's box of b (64 columns, k rows), M-major; B: a's rows, K-major.
          const std::uint64_t a_desc =
              wgmma_descriptor(stage_b(s) + consumer * wg::b_box_bytes + kk * 16 * 128, wg::b_box_bytes, 1024);
          const std::uint64_t b_desc = wgmma_descriptor(stage_a(s) + kk * 32, 16, 1024);
          wgmma_swapped<T, Swap>(d, a_desc, b_desc);
        } else {
          const std::uint64_t a_desc = wgmma_descriptor(stage_a(s) + consumer * 64 * 128 + kk * 32, 16, 1024);
          const std::uint64_t b_desc = wgmma_descriptor(stage_b(s) + kk * 16 * 128, wg::b_box_bytes, 1024);
          if constexpr (BN == 128) {
            wgmma_m64n128k16<T>(d, a_desc, b_desc);
          } else {
            wgmma_m64n64k16<T>(d, a_desc, b_desc);
          }
        }
      }
      wgmma_commit();
      wgmma_wait<1>();
      if (t > 0) mbarrier_arrive(empty + 8 * ((t - 1) % stages));
    }
    wgmma_wait<0>();
  }
  // Every copy has landed and every wgmma has read its operands: the stages may hold the tile.
  __syncthreads();
  float* const tile = reinterpret_cast<float*>(shared + (base - shared_address(shared)));
  if (warpgroup > 0 && warpgroup - 1 < consumers) {
    const int consumer = warpgroup - 1;
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    if constexpr (Swap > 0) {
      // The accumulators hold c transposed: M rows are the tile's columns, N columns its rows.
      const int col = consumer * 64 + warp * 16 + lane / 4;
#pragma unroll
      for (int j = 0; j < Swap / 8; ++j) {
        const int r = 8 * j + 2 * (lane % 4);
        tile[r * c_stride + col] = d[4 * j];
        tile[(r + 1) * c_stride + col] = d[4 * j + 1];
        tile[r * c_stride + col + 8] = d[4 * j + 2];
        tile[(r + 1) * c_stride + col + 8] = d[4 * j + 3];
      }
    } else {
      const int r_top = consumer * 64 + warp * 16 + lane / 4;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int col = 8 * j + 2 * (lane % 4);
        *reinterpret_cast<float2*>(tile + r_top * c_stride + col) = make_float2(d[4 * j], d[4 * j + 1]);
        *reinterpret_cast<float2*>(tile + (r_top + 8) * c_stride + col) = make_float2(d[4 * j + 2], d[4 * j + 3]);
      }
    }
  }
  // The reduction reads the rows below m.
  const int rows = min(wg::bm, m - row0), cols = min(BN, n - col0);
  const int groups = rows * (BN / 4);  // float4s of the valid rows
  const bool vectors = n % 4 == 0 && aligned<4 * sizeof(Out)>(c);
  const auto store = [&](int g, float4 v) {
    const int r = g / (BN / 4), col = (g % (BN / 4)) * 4;
    if (col >= cols) return;
    const int grow = row0 + r, gcol = col0 + col;
    float out[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) out[q] = activate(act, out[q] + (bias != nullptr && gcol + q < n ? bias[gcol + q] : 0.0f));
    Out* p = c + static_cast<std::int64_t>(grow) * n + gcol;
    if (vectors && gcol + 3 < n) {
      Vec<Out, 4> w;
#pragma unroll
      for (int q = 0; q < 4; ++q) w.v[q] = from_float<Out>(out[q]);
      *reinterpret_cast<Vec<Out, 4>*>(p) = w;
    } else {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        if (gcol + q < n) p[q] = from_float<Out>(out[q]);
      }
    }
  };
  const auto at = [&](int g) { return (g / (BN / 4)) * c_stride + (g % (BN / 4)) * 4; };
  if (split == 1) {
    __syncthreads();
    for (int g = threadIdx.x; g < groups; g += wg::threads) store(g, *reinterpret_cast<const float4*>(tile + at(g)));
    return;
  }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's partial tile is staged
  const int share_first = static_cast<int>(static_cast<std::int64_t>(groups) * rank / split);
  const int share_last = static_cast<int>(static_cast<std::int64_t>(groups) * (rank + 1) / split);
  for (int g = share_first + static_cast<int>(threadIdx.x); g < share_last; g += wg::threads) {
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int q = 0; q < split; ++q) {  // in rank order: the same sum whichever block adds it
      const float4 v = *cluster.map_shared_rank(reinterpret_cast<const float4*>(tile + at(g)), q);
      sum.x += v.x;
      sum.y += v.y;
      sum.z += v.z;
      sum.w += v.w;
    }
    store(g, sum);
  }
  cluster.sync();  // no block leaves while another still reads its shared memory
}

/// The narrow tile of width BN; a product of at most 64 rows takes the swapped operands, m on
/// wgmma's N side (16, 32 or 64).
template <class T, class Out, int BN>
__device__ __forceinline__ void matmul_narrow_tile_for_rows(std::int32_t m, std::int32_t n, std::int32_t k,
                                                            const float* bias, std::int32_t act, Out* c,
                                                            const MatmulMaps& maps, unsigned char* shared, int split) {
  if (m <= 16) {
    matmul_narrow_tile<T, Out, BN, 16>(m, n, k, bias, act, c, maps, shared, split);
  } else if (m <= 32) {
    matmul_narrow_tile<T, Out, BN, 32>(m, n, k, bias, act, c, maps, shared, split);
  } else if (m <= 64) {
    matmul_narrow_tile<T, Out, BN, 64>(m, n, k, bias, act, c, maps, shared, split);
  } else {
    matmul_narrow_tile<T, Out, BN>(m, n, k, bias, act, c, maps, shared, split);
  }
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

/// Threads 0 .. 255 compute the block's 128 x 256 tile as two 128 x 128 halves on mma.sync.
template <class T, class Out>
__device__ __noinline__ void matmul_generic_tile(std::int32_t m, std::int32_t n, std::int32_t k, const T* a, const T* b,
                                                    const float* bias, std::int32_t act, Out* c, unsigned char* shared) {
  if (threadIdx.x >= mm::threads) return;
  unsigned char* aligned_shared = shared + ((128 - shared_address(shared) % 128) % 128);
  const auto sync = [] { asm volatile("bar.sync 1, %0;" ::"n"(mm::threads) : "memory"); };
  const int row0 = blockIdx.y * wg::bm, col0 = blockIdx.x * wg::bn;
#pragma unroll 1
  for (int half = 0; half < wg::bn / mm::bn; ++half) {
    mma_sync_tile<T>(m, n, k, a, b, bias, act, c, row0, col0 + half * mm::bn, aligned_shared, sync);
    sync();  // the second half reuses the shared buffers
  }
}

/// The last resort, for a launch shape other than the kernel's own (a graph file's, say): every
/// thread of the block computes elements of the tile as plain dot products, no shared memory.
template <class T, class Out>
__device__ __noinline__ void matmul_plain_tile(std::int32_t m, std::int32_t n, std::int32_t k, const T* a, const T* b,
                                               const float* bias, std::int32_t act, Out* c) {
  const int threads = blockDim.x * blockDim.y * blockDim.z;
  const int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int row0 = blockIdx.y * wg::bm, col0 = blockIdx.x * wg::bn;
  for (int e = thread; e < wg::bm * wg::bn; e += threads) {
    const int r = row0 + e / wg::bn, col = col0 + e % wg::bn;
    if (r >= m || col >= n) continue;
    float acc = 0.0f;
    for (int p = 0; p < k; ++p) {
      acc = fmaf(to_float(a[static_cast<std::int64_t>(r) * k + p]), to_float(b[static_cast<std::int64_t>(p) * n + col]), acc);
    }
    c[static_cast<std::int64_t>(r) * n + col] = from_float<Out>(activate(act, acc + (bias != nullptr ? bias[col] : 0.0f)));
  }
}

/// c = act(a b + bias) in Out (float, or T for the cast variant); see the top of this file.
/// Each block computes the 128 x 256 tile at (blockIdx.y, blockIdx.x) on the best path its launch
/// allows: TMA and wgmma with the kernel's own shape (384 threads, wg::shared_bytes) and valid
/// maps; mma.sync with at least 256 threads and its shared memory; plain dot products otherwise.
template <class T, class Out>
__global__ void __launch_bounds__(wg::threads, 1)
    matmul_wgmma_kernel(std::int32_t m, std::int32_t n, std::int32_t k, const T* a, const T* b, const float* bias,
                        std::int32_t act, Out* c, const __grid_constant__ MatmulMaps maps) {
  ::flowdsl::kernels::detail::programmatic_prologue();
  extern __shared__ __align__(1024) unsigned char matmul_shared[];
  const bool one_dimensional = blockDim.y == 1 && blockDim.z == 1;
  // The tile width the grid was made for: the narrowest of 64, 128 and 256 whose tiles cover n.
  const int bn = static_cast<std::int64_t>(gridDim.x) * 64 >= n ? 64 : static_cast<std::int64_t>(gridDim.x) * 128 >= n ? 128 : 256;
#if defined(FLOWDSL_MATMUL_WGMMA)
  if (maps.valid != 0 && one_dimensional && blockDim.x == wg::threads && dynamic_shared_bytes() >= wg::shared_bytes) {
    // k split across the blocks of a cluster along z that spans the grid's z; else only z = 0 works.
    const unsigned cluster_z = cooperative_groups::this_cluster().dim_blocks().z;
    const int split = cluster_z > 1 && cluster_z == gridDim.z && bn < 256 ? static_cast<int>(cluster_z) : 1;
    if (split == 1 && blockIdx.z > 0) return;
    if (bn == 64) {
      matmul_narrow_tile_for_rows<T, Out, 64>(m, n, k, bias, act, c, maps, matmul_shared, split);
    } else if (bn == 128) {
      matmul_narrow_tile_for_rows<T, Out, 128>(m, n, k, bias, act, c, maps, matmul_shared, split);
    } else {
      matmul_wgmma_tile<T>(m, n, k, bias, act, c, maps, matmul_shared);
    }
    return;
  }
#endif
  if (blockIdx.z > 0) return;  // the generic paths compute whole tiles of k
  (void)bn;
  if (one_dimensional && blockDim.x >= mm::threads && dynamic_shared_bytes() >= matmul_fallback_shared_bytes<T>()) {
    matmul_generic_tile(m, n, k, a, b, bias, act, c, matmul_shared);
  } else {
    matmul_plain_tile(m, n, k, a, b, bias, act, c);
  }
}

}  // namespace flowdsl::kernels::detail
