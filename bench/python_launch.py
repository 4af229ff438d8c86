#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The host cost of launching from Python: flowdsl's Runtime.launch of a cached graph and a tensor
swap (Node.set + launch), against the same calls made from C++ in this process (the module's
_bench loops: Runtime::launch, RegisteredKernelNode::set_bytes + Runtime::launch) and against
torch.cuda.CUDAGraph.replay() of the same chain.

The chain: N kernels scaling one float32 buffer of 4096 elements in place (factors 1.0625 and
0.9375 alternating): flowdsl's scale.f32 on a PyTorch tensor, PyTorch's x.mul_(a) captured.
Host clock around one call, the device drained before each, median of --replays calls (Python
and C++ taking turns in batches, so that both see the same state of the host); --repeats
repetitions of everything, reported as median (min-max). Results of both sides are checked
against each other.

    python3 bench/python_launch.py [--json FILE]
(with the flowdsl package importable: pip install ./python, or PYTHONPATH=<build>/python)
"""
import argparse
import json
import statistics
import sys
import time

import torch

import flowdsl

FACTORS = (1.0625, 0.9375)
BATCHES = 4  # Python and C++ take turns, this many batches each

native = getattr(flowdsl._flowdsl, "_bench", None)
if native is None:
    sys.exit("python_launch.py: this flowdsl module has no _bench timing loops: run it on an in-tree build "
             "(cmake -DFLOWDSL_PYTHON=ON, then PYTHONPATH=build/python); the package pip installs does not ship them")


def timed(call, replays):
    samples = []
    for i in range(replays + 2):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        call(i)
        t1 = time.perf_counter_ns()
        if i >= 2:
            samples.append((t1 - t0) / 1000.0)
    torch.cuda.synchronize()
    return statistics.median(samples)


def python_side(n, elements, replays):
    stream = torch.cuda.Stream()
    source = torch.rand(elements, device="cuda") + 0.5
    x = source.clone()
    other = source.clone()
    with torch.cuda.stream(stream):
        g = flowdsl.Graph()
        previous = None
        first = None
        for i in range(n):
            node = g.kernel(f"mul{i}", "scale.f32", n=elements, a=FACTORS[i % 2], x=x, y=x)
            if previous is not None:
                node.after(previous)
            first = first or node
            previous = node
        rt = flowdsl.Runtime()
        assert rt.launch(g, stream=stream)["kind"] == "instantiated"
        stream.synchronize()
        x.copy_(source)
        rt.launch(g, stream=stream)
        stream.synchronize()
        flowdsl_result = x.clone()

        # PyTorch's CUDA graph of the same chain.
        y = source.clone()
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            for i in range(n):
                y.mul_(FACTORS[i % 2])
        y.copy_(source)
        graph.replay()
        stream.synchronize()
        torch_result = y.clone()

        # The headline figures: Python's calls, the same calls made from C++ in this process
        # (flowdsl._flowdsl._bench: Runtime::launch, RegisteredKernelNode::set_bytes) and
        # PyTorch's replay(), in alternating batches so that all see the same state of the host.
        # Each Python call is timed bare between two clock reads, as the C++ loops time theirs.
        launch = rt.launch
        tensors = (other, x)
        per_batch = max(replays // BATCHES, 2) // 2 * 2  # even: a batch of swaps ends on x
        replay_call = graph.replay
        py_hit, cpp_hit, py_swap, cpp_swap, replays_us = [], [], [], [], []
        for _ in range(BATCHES):
            for i in range(per_batch + 2):
                torch.cuda.synchronize()
                t0 = time.perf_counter_ns()
                launch(g, stream=stream)
                t1 = time.perf_counter_ns()
                if i >= 2:
                    py_hit.append((t1 - t0) / 1000.0)
            cpp_hit += native.launch(rt, g, stream, per_batch + 2)[2:]
            for i in range(per_batch + 2):
                tensor = tensors[i % 2]
                torch.cuda.synchronize()
                t0 = time.perf_counter_ns()
                first.set(x=tensor)
                launch(g, stream=stream)
                t1 = time.perf_counter_ns()
                if i >= 2:
                    py_swap.append((t1 - t0) / 1000.0)
            cpp_swap += native.swap(rt, first, "x", other.data_ptr(), x.data_ptr(), stream, per_batch + 2)[2:]
            for i in range(per_batch + 2):
                torch.cuda.synchronize()
                t0 = time.perf_counter_ns()
                replay_call()
                t1 = time.perf_counter_ns()
                if i >= 2:
                    replays_us.append((t1 - t0) / 1000.0)
        torch.cuda.synchronize()
        first.set(x=x)
        assert rt.launch(g, stream=stream)["kind"] in ("hit", "updated")
        hit, cpp_launch = statistics.median(py_hit), statistics.median(cpp_hit)
        swapped, cpp_swapped = statistics.median(py_swap), statistics.median(cpp_swap)
        replay = statistics.median(replays_us)

        parts = {"set": [], "launch": []}

        def swap_in_parts(i):
            t0 = time.perf_counter_ns()
            first.set(x=other if i % 2 == 0 else x)
            t1 = time.perf_counter_ns()
            rt.launch(g, stream=stream)
            t2 = time.perf_counter_ns()
            if i >= 2:
                parts["set"].append((t1 - t0) / 1000.0)
                parts["launch"].append((t2 - t1) / 1000.0)

        timed(swap_in_parts, replays)

        # Node.set alone, with no launch in between: what it costs when the caches hold what it
        # touches (a launch of a large graph between two sets evicts much of it).
        set_alone = timed(lambda i: first.set(x=other if i % 2 == 0 else x), replays)
        first.set(x=x)
        stats = rt.stats
        assert stats["reinstantiations"] == 0 and stats["misses"] == 1, stats

    error = ((flowdsl_result - torch_result).abs() / torch_result.abs()).max().item()
    return {"python launch": hit, "python swap + launch": swapped, "python set": statistics.median(parts["set"]), "python set alone": set_alone,
            "python update launch": statistics.median(parts["launch"]), "torch replay": replay, "max_rel_error": error,
            "c++ launch": cpp_launch, "c++ swap + launch": cpp_swapped}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", default="100,1000,2000")
    parser.add_argument("--elements", type=int, default=4096)
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    sizes = [int(s) for s in args.n.split(",")]
    runs = []
    for _ in range(args.repeats):
        runs.append({n: python_side(n, args.elements, args.replays) for n in sizes})

    def spread(n, key):
        v = [r[n][key] for r in runs]
        return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"

    ok = True
    print(f"GPU: {torch.cuda.get_device_name()}, PyTorch {torch.__version__}; host µs a call, "
          f"median (min-max) of {args.repeats} repetitions\n")
    print("| N | Python launch | C++ launch | Python − C++ (≤ 1.5) | torch replay() | Python / torch (≤ 0.5) "
          "| Python swap + launch | C++ swap + launch | Python − C++ (≤ 2) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in sizes:
        gap = [r[n]["python launch"] - r[n]["c++ launch"] for r in runs]
        ratio = [r[n]["python launch"] / r[n]["torch replay"] for r in runs]
        swap_gap = [r[n]["python swap + launch"] - r[n]["c++ swap + launch"] for r in runs]
        met = max(gap) <= 1.5 and max(ratio) <= 0.5 and max(swap_gap) <= 2.0
        ok = ok and all(r[n]["max_rel_error"] < 1e-5 for r in runs)
        print(f"| {n} | {spread(n, 'python launch')} | {spread(n, 'c++ launch')} | {min(gap):+.2f} to {max(gap):+.2f} "
              f"| {spread(n, 'torch replay')} | {min(ratio):.2f}-{max(ratio):.2f} | {spread(n, 'python swap + launch')} "
              f"| {spread(n, 'c++ swap + launch')} | {min(swap_gap):+.2f} to {max(swap_gap):+.2f} |"
              + ("" if met else "  (goal missed)"))
    print("\nThe swap's parts (Python): Node.set alone, then the launch that applies it")
    for n in sizes:
        print(f"N = {n}: set {spread(n, 'python set')}, update launch {spread(n, 'python update launch')}; "
              f"set with no launch between {spread(n, 'python set alone')}")
    print("\nresults: flowdsl's chain and PyTorch's agree" if ok else "\nRESULTS DIFFER")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "runs": [{str(k): v for k, v in r.items()} for r in runs]}, f,
                      indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
