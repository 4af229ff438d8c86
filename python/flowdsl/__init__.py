# SPDX-License-Identifier: Apache-2.0
"""flowdsl: explicit CUDA graphs from Python.

Declare a graph node by node on your own tensors (PyTorch, CuPy, JAX or anything with
``__dlpack__`` or ``__cuda_array_interface__``, read without a copy), or load one from a JSON
graph file; flowdsl validates it (every problem at once, naming the node), keeps its executable
by topology and re-launches it with parameter-only updates on your stream.

    import flowdsl, torch
    x = torch.randn(4096, device="cuda"); y = torch.empty_like(x)
    g = flowdsl.Graph()
    g.kernel("scale", "scale.f32", n=x.numel(), a=2.0, x=x, y=y)
    rt = flowdsl.Runtime()
    rt.launch(g, stream=torch.cuda.current_stream())

See docs/python.md.
"""

from ._flowdsl import (
    Body,
    CudaError,
    DebugError,
    Error,
    Family,
    Graph,
    JsonError,
    LaunchReport,
    Node,
    Profiler,
    ProfilerError,
    Runtime,
    UsageError,
    ValidationError,
    __version__,
    attention_splits,
    check_file,
    fused_kernel_statistics,
    kernel_params,
    kernels,
    load,
)

__all__ = [
    "Body",
    "CudaError",
    "DebugError",
    "Error",
    "Family",
    "Graph",
    "JsonError",
    "LaunchReport",
    "Node",
    "Profiler",
    "ProfilerError",
    "Runtime",
    "UsageError",
    "ValidationError",
    "__version__",
    "attention_splits",
    "check_file",
    "fused_kernel_statistics",
    "kernel_params",
    "kernels",
    "load",
]
