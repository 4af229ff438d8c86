// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a documentation fragment (`<!-- snippet: fragment -->`, see cmake/ExtractSnippets.cmake)
// may assume: the public headers, and the names the docs use without declaring them. Snippets are
// compiled, never linked or run, so the names are declared and not defined. A fragment that
// declares one of these names itself shadows it.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <flowdsl/flowdsl.hpp>
#include <flowdsl/kernels.hpp>

// A host declaration stands in for the docs' __global__ kernel: fragments are compiled by the
// C++ compiler, and Graph::kernel() only needs the signature.
void scale_kernel(float* x, float a, int n);

// The graph, runtime and stream that a fragment continues with (a stream as cudaStream_t).
extern flowdsl::Graph g;
extern flowdsl::Runtime runtime;
extern cudaStream_t stream;
flowdsl::Graph decode_step(int bucket);  // docs/architecture.md, families of batch buckets
extern std::shared_ptr<spdlog::logger> my_logger;

// README.md and docs/architecture.md: scale n floats on the device.
extern int n;
extern std::size_t bytes;
extern std::uint32_t blocks, n_blocks;
extern float* d_x;
extern const float* h_x;
extern float* h_y;

// docs/kernels.md: pad a batch of rows, cast to half, a linear layer with GELU.
extern std::int32_t batch, width, hidden;
extern const float* d_values;
extern const float* d_next_values;
extern const std::int32_t* d_offsets;
extern float* d_padded;
extern const float* d_padded_const;
extern std::uint8_t* d_mask;
extern __half* d_x16;
extern const __half* d_x16_const;
extern const __half* d_w;
extern const float* d_bias;
extern float* d_h;
// docs/kernels.md, "Matrix multiply": two half layers chained by matmul_cast.
extern std::int32_t classes;
extern const __half* d_w1;
extern const __half* d_w2;
extern const float* d_b1;
extern const float* d_b2;
extern __half* d_h16;
extern const __half* d_h16_const;
extern __half* d_y16;

// docs/architecture.md, "Conditional nodes": a heat step and a decision kernel.
void heat_step(float* a, float* b, int n);
void keep_going(const float* residual, float tolerance, flowdsl::Condition loop);
extern flowdsl::Dim3 grid, block;
extern float* d_a;
extern float* d_b;
extern float tol;

// docs/kernels.md: a heat plate iterated to convergence inside a WHILE node.
extern std::int32_t nx, ny;
extern float alpha;
extern float* d_u;
extern float* d_v;
extern double* d_partials;
extern float* d_residual;
