#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fusion: a chain of element-wise steps over 2^24 floats as one flowdsl graph, fused and unfused,
against torch.compile (inductor) of the same chain, all in one run on the same tensors.

The chain (step k of S): k % 5 = 0 scale by a_k, 1 add the input x, 2 clamp to [-4, 4],
3 multiply by w, 4 axpy 0.25 x into the running value (in place); every other step writes a new
buffer, so the unfused graph moves each intermediate through memory and the fused one keeps it
in registers. GPU time per launch from CUDA events around --launches launches back to back;
--repeats repetitions of each figure, reported as median (min-max). Results: fused against
unfused bit for bit, torch.compile against flowdsl by largest difference. Also the time of the
one NVRTC compilation of each fused kernel, and the compilations a second Graph and Runtime of
the same chain cause (0 expected: the kernel is cached).

    python3 bench/fusion_bench.py [--steps 10 30] [--json FILE]
(with the flowdsl package importable: pip install ./python, or PYTHONPATH=<build>/python)
"""
import argparse
import json
import statistics

import torch

import flowdsl

N = 1 << 24


def factors(steps):
    return [1.0 + 0.001 * (k + 1) for k in range(steps)]


def build(steps, x, w, buffers, fuse):
    """The chain as a flowdsl graph on torch tensors; returns (graph, output tensor)."""
    g = flowdsl.Graph()
    g.fuse(fuse)
    a = factors(steps)
    t = x
    previous = None
    used = 0
    for k in range(steps):
        op = k % 5
        if op == 4:  # in place: t = 0.25 x + t
            node = g.kernel(f"s{k}", "axpy.f32", n=N, a=0.25, x=x, y=t)
        else:
            out = buffers[used]
            used += 1
            if op == 0:
                node = g.kernel(f"s{k}", "scale.f32", n=N, a=a[k], x=t, y=out)
            elif op == 1:
                node = g.kernel(f"s{k}", "add.f32", n=N, a=t, b=x, out=out)
            elif op == 2:
                node = g.kernel(f"s{k}", "clamp.f32", n=N, lo=-4.0, hi=4.0, x=t, y=out)
            else:
                node = g.kernel(f"s{k}", "multiply.f32", n=N, a=t, b=w, out=out)
            t = out
        if previous is not None:
            node.after(previous)
        previous = node
    return g, t


def reference(steps):
    a = factors(steps)

    def chain(x, w):
        t = x
        for k in range(steps):
            op = k % 5
            if op == 0:
                t = a[k] * t
            elif op == 1:
                t = t + x
            elif op == 2:
                t = torch.clamp(t, -4.0, 4.0)
            elif op == 3:
                t = t * w
            else:
                t = 0.25 * x + t
        return t

    return chain


def gpu_us(launch, launches, stream):
    with torch.cuda.stream(stream):
        for _ in range(3):
            launch()
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(launches):
            launch()
        stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1000.0 / launches


def one_repeat(steps, launches, stream, compiled):
    x = torch.rand(N, device="cuda") * 2 - 1
    w = torch.rand(N, device="cuda") + 0.5
    buffers = [torch.empty(N, device="cuda") for _ in range(steps)]
    rt = flowdsl.Runtime()
    plain, out_plain = build(steps, x, w, buffers, False)
    before = flowdsl.fused_kernel_statistics()
    fused, out_fused = build(steps, x, w, buffers, True)
    with torch.cuda.stream(stream):
        out_plain.fill_(float("nan"))
        rt.launch(plain, stream=stream)
        want = out_plain.clone()
        out_fused.fill_(float("nan"))
        report = rt.launch(fused, stream=stream)
        got = out_fused.clone()
    stream.synchronize()
    after = flowdsl.fused_kernel_statistics()
    compiled_now = after["compilations"] - before["compilations"]
    # A second Graph and Runtime of the same chain: the kernel is found, not compiled.
    again, _ = build(steps, x, w, buffers, True)
    rt2 = flowdsl.Runtime()
    rt2.launch(again, stream=stream)
    stream.synchronize()
    recompiled = flowdsl.fused_kernel_statistics()["compilations"] - after["compilations"]
    with torch.cuda.stream(stream):
        inductor = compiled(x, w)
    stream.synchronize()
    diff = (inductor - got).abs().max().item()
    t_plain = gpu_us(lambda: rt.launch(plain, stream=stream), launches, stream)
    t_fused = gpu_us(lambda: rt.launch(fused, stream=stream), launches, stream)
    t_torch = gpu_us(lambda: compiled(x, w), launches, stream)
    return {
        "unfused_us": t_plain,
        "fused_us": t_fused,
        "torch_compile_us": t_torch,
        "speedup": t_plain / t_fused,
        "vs_torch_compile": t_torch / t_fused,
        "bit_identical": bool(torch.equal(want, got)),
        "max_diff_vs_torch_compile": diff,
        "first_launch": report["kind"],
        "compilations_first": compiled_now,
        "compile_ms": after["last_compile_seconds"] * 1e3 if compiled_now else None,
        "compilations_second_graph": recompiled,
    }


def span(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 30])
    parser.add_argument("--launches", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    stream = torch.cuda.Stream()
    results = {}
    for steps in args.steps:
        compiled = torch.compile(reference(steps))
        runs = [one_repeat(steps, args.launches, stream, compiled) for _ in range(args.repeats)]
        results[steps] = runs
        print(f"chain of {steps} steps over 2^24 floats ({args.repeats} runs: median (min-max))")
        for key, label in (("unfused_us", "unfused graph, us/launch"), ("fused_us", "fused graph, us/launch"),
                           ("torch_compile_us", "torch.compile, us/call"), ("speedup", "fused speed-up over unfused"),
                           ("vs_torch_compile", "fused / torch.compile throughput"),
                           ("compile_ms", "NVRTC compilation, ms"),
                           ("max_diff_vs_torch_compile", "largest |torch.compile - fused|")):
            print(f"  {label:38s} {span([r[key] for r in runs])}")
        print(f"  bit-identical fused vs unfused: {[r['bit_identical'] for r in runs]}; "
              f"compilations first graph {[r['compilations_first'] for r in runs]}, "
              f"second graph and runtime {[r['compilations_second_graph'] for r in runs]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
