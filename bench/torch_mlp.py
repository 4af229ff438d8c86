#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's side of the serving MLP benchmark: one torch.cuda.CUDAGraph replay per batch, per bucket.

The MLP is samples/serving.cu's (widths 1024 -> 4096 -> 1024 -> 16). Per batch of `rows` rows
the graph holds, as eager PyTorch ops captured once:
  - the pinned float input copied to the device (non_blocking) and cast to bfloat16;
  - per hidden layer: torch.mm of bfloat16 operands accumulated and returned in float
    (out_dtype=torch.float32), + the float bias, GELU with approximate='tanh', stored bfloat16;
  - the last layer: the same matmul + bias, kept as float logits;
  - softmax over the classes in float, copied to a pinned host output (non_blocking).
The GELU is the tanh approximation because cuBLASLt's GELU epilogue computes that one, and so does
the hand-written cuBLASLt graph it is compared with (bench/mlp_reference_impls.cuh); flowdsl's
kernels (kernels/common.cuh, fk::reference::activate) use the erf form, which differs from it by
at most 4.7e-4 (near |x| = 2.7).

Weights: --weights DIR reads w0.npy, b0.npy, w1.npy, b1.npy, ... (float32; w{l} is layer l's
[k][n] matrix, row-major, b{l} its n biases), as the C++ benchmark writes them, and rounds the
weights to bfloat16 (to nearest even, as the C++ side does). Without --weights, the widths of
--layers get random weights drawn from --seed the way the serving sample draws its own (uniform
in +-sqrt(3 / k), rounded to bfloat16; biases uniform in +-0.1), not the same numbers.

Timing, per bucket: CUDA events recorded on the replay stream just before and after one replay,
the stream synchronised after each, so that every replay runs alone; --warmup replays first,
then the median of --replays. The host time of the replay() call is kept too.
Check, per bucket: the graph's probabilities against the same forward pass run eagerly on the
same input (max abs difference; more than --tolerance fails the run).

Usage:
  python3 bench/torch_mlp.py --weights /tmp/mlp_weights --json torch_mlp.json
  python3 bench/torch_mlp.py --replays 100 --warmup 20        # random weights, a short run
Prints one line per bucket, `torch_graph rows=16 us_per_batch=...`; exits 1 when a check fails.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time


def int_list(text):
    values = [int(v) for v in text.split(",")]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers separated by commas")
    return values


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--weights", metavar="DIR", help="directory of w{l}.npy and b{l}.npy (float32)")
    p.add_argument("--layers", type=int_list, default=[1024, 4096, 1024, 16],
                   help="widths of the random MLP without --weights: input, hidden..., classes")
    p.add_argument("--buckets", type=int_list, default=[16, 32, 64, 128], help="rows per batch")
    p.add_argument("--warmup", type=int, default=200, help="replays before the timed ones, per bucket")
    p.add_argument("--replays", type=int, default=1000, help="timed replays per bucket")
    p.add_argument("--seed", type=int, default=1, help="seed of the random weights and of the inputs")
    p.add_argument("--tolerance", type=float, default=1e-3,
                   help="largest abs difference of a probability between graph and eager forward")
    p.add_argument("--style", choices=["linear", "float_accumulate"], default="linear",
                   help="linear: bf16 nn.Linear layers (PyTorch's usual form); float_accumulate: float products and bias")
    p.add_argument("--profile", action="store_true",
                   help="also print the GPU time of each kernel of 20 replays per bucket (torch.profiler)")
    p.add_argument("--json", metavar="FILE", help="write every figure, the options and the device to FILE")
    args = p.parse_args()
    if args.warmup < 0 or args.replays < 1:
        p.error("need --warmup >= 0 and --replays >= 1")
    if args.weights is None and len(args.layers) < 2:
        p.error("--layers needs two or more widths")
    return args


def load_torch():
    try:
        import torch
    except ImportError as e:
        sys.exit(f"torch_mlp: PyTorch cannot be imported ({e}); run this with the python3 that has torch")
    if not torch.cuda.is_available():
        sys.exit("torch_mlp: torch.cuda.is_available() is False: no CUDA device for PyTorch")
    return torch


def read_weights(torch, directory):
    """Host float tensors (weights [k][n], biases [n]) from w{l}.npy and b{l}.npy, l = 0, 1, ..."""
    try:
        import numpy as np
    except ImportError as e:
        sys.exit(f"torch_mlp: --weights needs numpy ({e})")
    weights, biases = [], []
    while os.path.exists(os.path.join(directory, f"w{len(weights)}.npy")):
        l = len(weights)
        w = np.load(os.path.join(directory, f"w{l}.npy"))
        b = np.load(os.path.join(directory, f"b{l}.npy"))
        if w.ndim == 1 and b.ndim == 1 and b.size and w.size % b.size == 0:  # flat [k * n], as mlp_bench writes
            w = w.reshape(w.size // b.size, b.size)
        if w.dtype != np.float32 or b.dtype != np.float32 or w.ndim != 2 or b.shape != (w.shape[1],):
            sys.exit(f"torch_mlp: layer {l}: want float32 w{l} [k][n] and b{l} [n], "
                     f"got {w.dtype} {w.shape} and {b.dtype} {b.shape}")
        if weights and weights[-1].shape[1] != w.shape[0]:
            sys.exit(f"torch_mlp: layer {l}: w{l} has {w.shape[0]} rows, layer {l - 1} gives {weights[-1].shape[1]}")
        weights.append(torch.from_numpy(w))
        biases.append(torch.from_numpy(b))
    if not weights:
        sys.exit(f"torch_mlp: no w0.npy in {directory}")
    return weights, biases


def random_weights(torch, widths, seed):
    g = torch.Generator().manual_seed(seed)
    weights, biases = [], []
    for k, n in zip(widths, widths[1:]):
        weights.append((torch.rand(k, n, generator=g) * 2 - 1) * math.sqrt(3.0 / k))
        biases.append((torch.rand(n, generator=g) * 2 - 1) * 0.1)
    return weights, biases


def forward(torch, layers, x_host, x_device, out_host, style):
    """The batch through the MLP, from pinned x_host to pinned out_host; layers: (bf16 W [k][n],
    float b, bf16 W^T [n][k] as nn.Linear keeps it, bf16 b). "linear": the way a PyTorch model
    is written (bf16 nn.Linear layers, whose bias cuBLASLt fuses; logits cast to float for the
    softmax); "float_accumulate": float products, float bias, then gelu and the cast."""
    F = torch.nn.functional
    x_device.copy_(x_host, non_blocking=True)
    h = x_device.to(torch.bfloat16)
    if style == "linear":
        for _, _, wt, b16 in layers[:-1]:
            h = F.gelu(F.linear(h, wt, b16), approximate="tanh")
        _, _, wt, b16 = layers[-1]
        logits = F.linear(h, wt, b16).float()
    else:
        for w, b, _, _ in layers[:-1]:
            z = torch.mm(h, w, out_dtype=torch.float32) + b
            h = F.gelu(z, approximate="tanh").to(torch.bfloat16)
        w, b, _, _ = layers[-1]
        logits = torch.mm(h, w, out_dtype=torch.float32) + b
    out_host.copy_(torch.softmax(logits, dim=1), non_blocking=True)


def print_profile(torch, graph, stream, rows):
    """The kernels and copies of 20 replays, by GPU time, as torch.profiler (CUPTI) saw them."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with torch.cuda.stream(stream):
            for _ in range(20):
                graph.replay()
        stream.synchronize()
    print(f"torch_mlp: rows={rows}, 20 replays, per kernel:")
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=15), flush=True)


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_bucket(torch, layers, rows, args):
    width, classes = layers[0][0].shape[0], layers[-1][0].shape[1]
    g = torch.Generator().manual_seed(args.seed + 7 + rows)
    x_host = (torch.rand(rows, width, generator=g) * 2 - 1).pin_memory()
    x_device = torch.empty(rows, width, device="cuda")
    out_host = torch.empty(rows, classes).pin_memory()
    eager_out = torch.empty(rows, classes).pin_memory()
    stream = torch.cuda.Stream()

    with torch.cuda.stream(stream):
        # Before the capture, as PyTorch's documentation asks: cuBLAS handles and workspaces, the
        # allocator's blocks. The last pass is the eager result the graph is checked against.
        for _ in range(3):
            forward(torch, layers, x_host, x_device, eager_out, args.style)
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        forward(torch, layers, x_host, x_device, out_host, args.style)

    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gpu_us, host_us = [], []
    with torch.cuda.stream(stream):
        for r in range(args.warmup + args.replays):
            start.record(stream)
            h0 = time.perf_counter()
            graph.replay()
            h1 = time.perf_counter()
            stop.record(stream)
            stop.synchronize()
            if r >= args.warmup:
                gpu_us.append(start.elapsed_time(stop) * 1e3)
                host_us.append((h1 - h0) * 1e6)
    if args.profile:
        print_profile(torch, graph, stream, rows)

    diff = float((out_host - eager_out).abs().max())
    return {
        "rows": rows,
        "us_per_batch": statistics.median(gpu_us),
        "us_p10": quantile(gpu_us, 0.10),
        "us_p90": quantile(gpu_us, 0.90),
        "us_min": min(gpu_us),
        "host_replay_call_us": statistics.median(host_us),
        "max_abs_diff_eager": diff,
        "ok": diff <= args.tolerance,
    }


def main():
    args = parse_args()
    torch = load_torch()
    if args.weights:
        weights, biases = read_weights(torch, args.weights)
    else:
        weights, biases = random_weights(torch, args.layers, args.seed)
    widths = [weights[0].shape[0]] + [w.shape[1] for w in weights]
    layers = []
    for w, b in zip(weights, biases):
        w16 = w.to("cuda", torch.bfloat16)
        layers.append((w16, b.to("cuda", torch.float32), w16.t().contiguous(), b.to("cuda", torch.bfloat16)))
    print(f"torch_mlp: MLP {'-'.join(map(str, widths))}, weights "
          f"{args.weights or 'random (seed %d)' % args.seed}, gelu tanh, style {args.style}, "
          f"median of {args.replays} replays after {args.warmup}", flush=True)

    results = []
    for rows in args.buckets:
        r = run_bucket(torch, layers, rows, args)
        results.append(r)
        print(f"torch_graph style={args.style} rows={rows} us_per_batch={r['us_per_batch']:.2f}", flush=True)
        print(f"torch_mlp: rows={rows} graph vs eager max_abs_diff={r['max_abs_diff_eager']:.3g} "
              f"{'ok' if r['ok'] else 'MISMATCH'}", file=sys.stderr, flush=True)
    ok = all(r["ok"] for r in results)

    if args.json:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        report = {
            "bench": "torch_mlp",
            "gpu": props.name,
            "compute_capability": f"{props.major}.{props.minor}",
            "multiprocessors": props.multi_processor_count,
            "torch_version": torch.__version__,
            "torch_cuda_version": torch.version.cuda,
            "layers": widths,
            "weights": args.weights or f"random, seed {args.seed}",
            "gelu": "tanh",
            "style": args.style,
            "warmup": args.warmup,
            "replays": args.replays,
            "tolerance": args.tolerance,
            "buckets": results,
            "ok": ok,
        }
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        print(f"wrote {args.json}", flush=True)
    if not ok:
        print("torch_mlp: FAILED (graph and eager forward differ, see above)", file=sys.stderr, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
