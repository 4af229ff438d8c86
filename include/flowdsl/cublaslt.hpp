// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file cublaslt.hpp
/// \brief Matrix products by cuBLASLt as library nodes (flowdsl/kinds/library.hpp): the calls,
/// registered by register_builtins() as "cublaslt.matmul.bf16", "cublaslt.matmul.bf16.f32",
/// "cublaslt.matmul.f16" and "cublaslt.matmul.f16.f32" (b in [k, n] layout), the same as
/// "cublaslt.linear.*" with weights in a linear layer's [n, k] layout, and launchers for C++ graphs.
///
/// \code
///   // h[rows, 4096] = gelu(x[rows, 1024] w[1024, 4096] + b[4096]), bf16 out, float accumulation
///   flowdsl::kernels::cublaslt_matmul(g, "linear1", rows, 4096, 1024, x, w, b,
///                                     flowdsl::kernels::Epilogue::bias_gelu, h).after(cast);
/// \endcode
///
/// Per device, flowdsl keeps one cuBLASLt handle, the algorithm cuBLASLt's heuristic picks for
/// each shape (asked once, when a shape is first recorded) and a 32 MiB workspace per output
/// buffer: two calls that write distinct outputs never share a workspace, so executables that
/// run at once on several streams do not race on one (calls writing the same output race on it
/// anyway). These live until the process ends.

#include <cstdint>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flowdsl/graph.hpp"
#include "flowdsl/kernels.hpp"

namespace flowdsl::kernels {

/// \brief What a cuBLASLt product does after accumulating (an i32 parameter: values are stable).
/// The gelu is cuBLASLt's: the tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
enum class Epilogue : std::int32_t { none = 0, bias = 1, bias_gelu = 2, bias_relu = 3 };
/// The names of Epilogue's values in order, as the registered library calls declare them
/// (graph files may write `"epilogue": "bias_gelu"`).
#define FLOWDSL_EPILOGUE_NAMES "{none, bias, bias_gelu, bias_relu}"

/// \brief c[m, n] = epilogue(a[m, k] b[k, n] + bias[n]), row-major, float accumulation, on the
/// stream given. `Out` is T (bias of type T, as cuBLASLt wants) or float. `bias` may be null
/// for Epilogue::none. Returns cuBLASLt's status (CUBLAS_STATUS_SUCCESS is 0); for a library node.
/// T = __half or __nv_bfloat16.
template <class T, class Out>
int cublaslt_matmul_call(cudaStream_t stream, i32 m, i32 n, i32 k, const T* a, const T* b, const Out* bias, i32 epilogue,
                         Out* c);

/// \brief Declares a library node making cublaslt_matmul_call (see there).
template <class T, class Out>
LibraryNode<i32, i32, i32, const T*, const T*, const Out*, i32, Out*> cublaslt_matmul(Into g, std::string name, i32 m, i32 n,
                                                                                     i32 k, const T* a, const T* b,
                                                                                     const Out* bias, Epilogue epilogue,
                                                                                     Out* c);

/// \brief y[m, n] = epilogue(x[m, k] w[n, k]^T + bias[n]): cublaslt_matmul_call with the weights
/// as Hugging Face and PyTorch keep a linear layer's ([out, in], row-major), without a transposed
/// copy. For decoding at batches past where kernels::linear's matrix-vector product pays.
template <class T, class Out>
int cublaslt_linear_call(cudaStream_t stream, i32 m, i32 n, i32 k, const T* x, const T* w, const Out* bias, i32 epilogue,
                         Out* y);

/// \brief Declares a library node making cublaslt_linear_call (see there).
template <class T, class Out>
LibraryNode<i32, i32, i32, const T*, const T*, const Out*, i32, Out*> cublaslt_linear(Into g, std::string name, i32 m, i32 n,
                                                                                     i32 k, const T* x, const T* w,
                                                                                     const Out* bias, Epilogue epilogue,
                                                                                     Out* y);

}  // namespace flowdsl::kernels
