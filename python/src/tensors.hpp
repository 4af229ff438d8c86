// SPDX-License-Identifier: Apache-2.0
// Python objects as device memory: integers (raw addresses), objects with
// __cuda_array_interface__ (CuPy, Numba, PyTorch) and objects with __dlpack__ (PyTorch, CuPy,
// JAX), read without a copy. What a kernel parameter needs of them is checked by the caller.
#pragma once

#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "flowdsl/scalar_type.hpp"

namespace flowdsl::python {

/// \brief Memory a Python object stands for.
struct Memory {
  std::uintptr_t address = 0;
  std::size_t bytes = 0;                 ///< 0 when unknown (a raw address)
  std::optional<ScalarType> dtype;       ///< element type, when the object has one
  std::int64_t elements = 0;             ///< element count (0 when unknown)
  bool device = true;                    ///< CUDA device or managed memory (or unknown: an int)
  const char* source = "address";        ///< what kind of object: "tensor", "host array", ...

  /// \brief How to name it in messages ("tensor of 4096 float32"); made only for one.
  std::string what() const;
};

/// \brief Names what is being read, for messages ("node 'k', parameter 'x'"): made only when one
/// is raised, not on every call.
using Where = std::function<std::string()>;

/// \brief Reads `object` as memory: an int, a torch.Tensor, or an object with __dlpack__ or
/// __cuda_array_interface__. A non-contiguous array is refused (kernels take dense buffers).
/// \throws nanobind::type_error naming `where` for anything else.
Memory memory_of(nanobind::handle object, const Where& where);

/// \brief The handle of a torch.cuda.Stream (read through its attribute, the cheapest way), or
/// nothing when `object` is not one (or torch is not imported).
std::optional<cudaStream_t> torch_stream(nanobind::handle object);

/// \brief "float32", "bfloat16", ... (the names PyTorch and NumPy use).
const char* dtype_name(ScalarType type) noexcept;

}  // namespace flowdsl::python
