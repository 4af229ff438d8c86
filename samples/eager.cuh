// The baseline the samples and the bench compare graph replay with: the same nodes, in plan
// order, each launched on its own on a stream (cudaLaunchKernel, cudaMemcpyAsync, ...).
#pragma once

#include <algorithm>
#include <chrono>
#include <type_traits>
#include <variant>
#include <vector>

#include <cuda_runtime.h>

#include "common.cuh"
#include "flowdsl/flowdsl.hpp"

namespace sample {

/// Enqueues every node of `g` in plan order on `stream`, one call per node.
inline void launch_one_by_one(const flowdsl::Graph& g, cudaStream_t stream) {
  const flowdsl::Description& d = g.description();
  std::vector<void*> args;
  for (const flowdsl::PlanStep& step : g.plan().steps) {
    std::visit(
        [&](const auto& op) {
          using Op = std::decay_t<decltype(op)>;
          if constexpr (std::is_same_v<Op, flowdsl::KernelOp>) {
            args.clear();
            op.args.pointers(args);
            const dim3 grid(op.launch.grid.x, op.launch.grid.y, op.launch.grid.z);
            const dim3 block(op.launch.block.x, op.launch.block.y, op.launch.block.z);
            SAMPLE_CHECK(cudaLaunchKernel(op.function, grid, block, args.data(), op.launch.shared_bytes, stream));
          } else if constexpr (std::is_same_v<Op, flowdsl::MemcpyOp>) {
            SAMPLE_CHECK(cudaMemcpyAsync(op.dst, op.src, op.bytes, cudaMemcpyDefault, stream));
          } else if constexpr (std::is_same_v<Op, flowdsl::MemsetOp>) {
            if (op.element_size != 1) {
              std::fprintf(stderr, "launch_one_by_one: memset of %u-byte elements not supported\n", op.element_size);
              std::exit(1);
            }
            SAMPLE_CHECK(cudaMemsetAsync(op.dst, static_cast<int>(op.value), op.count, stream));
          } else if constexpr (std::is_same_v<Op, flowdsl::HostOp>) {
            SAMPLE_CHECK(cudaLaunchHostFunc(stream, op.fn, op.user_data));
          }
        },
        d.nodes[step.node].op);
  }
}

/// Seconds of host wall-clock time `f` takes.
template <class F>
double seconds_of(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace sample
