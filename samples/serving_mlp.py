#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The serving MLP from Python: flowdsl graphs on PyTorch tensors, one per batch bucket, checked
against PyTorch's own forward pass and timed against torch.cuda.CUDAGraph of the same MLP.

The MLP is samples/serving.cu's with cuBLASLt products (widths 1024 -> 4096 -> 1024 -> 16 by
default): the float input cast to bfloat16, each hidden layer a cuBLASLt product with its bias
and GELU (tanh form) fused, written in bfloat16, the last layer's product + bias kept in float,
then a softmax over the classes. A bucket's graph serves every batch of its row count: a new
batch is a new input tensor handed to the cast node (`Node.set(x=...)`), which the runtime
applies to the cached executable in place; nothing is instantiated again.

Per bucket, both sides replay their graph on one stream, each batch alone (the stream drained
after each): GPU time between CUDA events recorded around the launch, host time of the launch
call. flowdsl launches with a new input tensor each batch; PyTorch's graph reads a static input,
timed with and without the copy of the batch into it that serving needs.

    PYTHONPATH=build/python python3 samples/serving_mlp.py [--rows 1,16,64,256] [--replays 200]
Prints a table; exits 1 when a bucket's probabilities differ from PyTorch's by more than
--tolerance or the runtime instantiated more than once per bucket.
"""
import argparse
import statistics
import sys
import time

import torch

import flowdsl


def int_list(text):
    return [int(v) for v in text.split(",")]


class Weights:
    """bf16 weights [k][n] and biases (bf16 for the hidden layers, as cuBLASLt's bf16 epilogue
    takes them, float for the last), drawn uniform in +-sqrt(3 / k) and +-0.1."""

    def __init__(self, widths, seed):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        self.w, self.b = [], []
        for layer, (k, n) in enumerate(zip(widths, widths[1:])):
            bound = (3.0 / k) ** 0.5
            self.w.append(((torch.rand(k, n, device="cuda", generator=gen) * 2 - 1) * bound).bfloat16())
            bias = (torch.rand(n, device="cuda", generator=gen) * 2 - 1) * 0.1
            self.b.append(bias if layer == len(widths) - 2 else bias.bfloat16())


def torch_forward(x, weights):
    """PyTorch's forward pass: the same operations, float accumulation, bf16 hidden activations."""
    a = x.bfloat16()
    last = len(weights.w) - 1
    for layer, (w, b) in enumerate(zip(weights.w, weights.b)):
        h = torch.mm(a, w, out_dtype=torch.float32) + b.float()
        if layer < last:
            a = torch.nn.functional.gelu(h, approximate="tanh").bfloat16()
        else:
            return torch.softmax(h, dim=1)


class FlowdslMlp:
    """One bucket's graph: cast -> cuBLASLt layers -> softmax, on tensors allocated here."""

    def __init__(self, rows, widths, weights, x):
        self.graph = g = flowdsl.Graph()
        self.x16 = torch.empty(rows, widths[0], device="cuda", dtype=torch.bfloat16)
        self.hidden = [torch.empty(rows, n, device="cuda", dtype=torch.bfloat16) for n in widths[1:-1]]
        self.logits = torch.empty(rows, widths[-1], device="cuda")
        self.probs = torch.empty(rows, widths[-1], device="cuda")
        self.cast = g.kernel("cast_in", "cast.f32.bf16", n=x.numel(), x=x, y=self.x16)
        last, a = self.cast, self.x16
        layers = len(widths) - 1
        for layer in range(layers):
            k, n = widths[layer], widths[layer + 1]
            hidden = layer + 1 < layers
            node = g.library(f"linear{layer + 1}", "cublaslt.matmul.bf16" if hidden else "cublaslt.matmul.bf16.f32",
                             m=rows, n=n, k=k, a=a, b=weights.w[layer], bias=weights.b[layer],
                             epilogue="bias_gelu" if hidden else "bias", c=self.hidden[layer] if hidden else self.logits)
            node.after(last)
            last = node
            if hidden:
                a = self.hidden[layer]
        g.kernel("softmax", "softmax.warp.f32", rows=rows, cols=widths[-1], x=self.logits, y=self.probs).after(last)


def time_calls(stream, call, replays, warmup):
    """GPU µs (events around the call) and host µs of the call, medians, each call alone."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gpu, host = [], []
    for i in range(warmup + replays):
        stream.synchronize()
        start.record(stream)
        t0 = time.perf_counter_ns()
        call(i)
        t1 = time.perf_counter_ns()
        end.record(stream)
        end.synchronize()
        if i >= warmup:
            gpu.append(start.elapsed_time(end) * 1000.0)
            host.append((t1 - t0) / 1000.0)
    return statistics.median(gpu), statistics.median(host)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int_list, default=[1, 16, 64, 256], help="the buckets' row counts")
    parser.add_argument("--layers", type=int_list, default=[1024, 4096, 1024, 16], help="the MLP's widths")
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--tolerance", type=float, default=2e-2, help="max abs difference of probabilities")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("serving_mlp: no CUDA device")

    widths = args.layers
    weights = Weights(widths, args.seed)
    stream = torch.cuda.Stream()
    rt = flowdsl.Runtime()
    ok = True
    print(f"GPU: {torch.cuda.get_device_name()}, PyTorch {torch.__version__}; MLP {' -> '.join(map(str, widths))}, "
          f"µs a batch, median of {args.replays}\n")
    print("| rows | flowdsl GPU | torch graph GPU | flowdsl / torch | flowdsl launch, new input (host) "
          "| torch replay (host) | torch copy + replay (host) | max abs diff |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for rows in args.rows:
        batches = [torch.randn(rows, widths[0], device="cuda") for _ in range(2)]
        with torch.cuda.stream(stream):
            mlp = FlowdslMlp(rows, widths, weights, batches[0])
            launches = rt.stats["misses"]
            # Correctness first: each batch's probabilities against PyTorch's eager forward pass.
            diff = 0.0
            for x in batches:
                mlp.probs.fill_(float("nan"))
                mlp.cast.set(x=x)
                rt.launch(mlp.graph, stream=stream)
                stream.synchronize()
                diff = max(diff, (mlp.probs - torch_forward(x, weights)).abs().max().item())

            def flowdsl_batch(i):
                mlp.cast.set(x=batches[i % 2])
                rt.launch(mlp.graph, stream=stream)

            fl_gpu, fl_host = time_calls(stream, flowdsl_batch, args.replays, args.warmup)

            static_x = batches[0].clone()
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                static_probs = torch_forward(static_x, weights)
            graph.replay()
            mlp.cast.set(x=static_x)  # the same batch through both graphs
            rt.launch(mlp.graph, stream=stream)
            stream.synchronize()
            diff = max(diff, (static_probs - mlp.probs).abs().max().item())
            th_gpu, th_host = time_calls(stream, lambda i: graph.replay(), args.replays, args.warmup)

            def copy_and_replay(i):
                static_x.copy_(batches[i % 2], non_blocking=True)
                graph.replay()

            _, th_copy_host = time_calls(stream, copy_and_replay, args.replays, args.warmup)
        instantiated = rt.stats["misses"] - launches
        problems = ([f"probabilities differ by {diff:.2e}"] if diff > args.tolerance else []) + \
                   ([f"{instantiated} instantiations"] if instantiated != 1 else [])
        ok = ok and not problems
        print(f"| {rows} | {fl_gpu:.1f} | {th_gpu:.1f} | {fl_gpu / th_gpu:.2f} | {fl_host:.1f} | {th_host:.1f} "
              f"| {th_copy_host:.1f} | {diff:.2e} |" + (f"  FAILED: {', '.join(problems)}" if problems else ""))
    stats = rt.stats
    print(f"\nflowdsl runtime: {stats['launches']} launches, {stats['misses']} instantiations, "
          f"{stats['node_updates']} node updates, {stats['reinstantiations']} re-instantiations")
    print("results: flowdsl's probabilities match PyTorch's" if ok else "RESULTS DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
