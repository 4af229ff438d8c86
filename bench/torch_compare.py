#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""flowdsl against PyTorch's CUDA graphs on the same chain of small kernels.

One process pair: this Python process runs PyTorch's side, and runs flowdsl's side
(bench/torch_compare_bench, built with the library) as a subprocess, in turn, for each
repetition. The work is the same on both sides: a chain of N kernels, each scaling one float32
buffer of --elements elements in place by a factor (1.0625 and 0.9375 alternating), one kernel
per op: PyTorch's x.mul_(a), flowdsl's built-in scale.f32 with x and y the same buffer.

PyTorch side, per N:
  - build: torch.cuda.CUDAGraph capture_begin() ... N x.mul_(a) ... capture_end() on a side
    stream (capture_end instantiates), then the first replay() call: host clock, the device
    synchronised before and after; median of --builds. The torch.cuda.graph() context manager
    (which also synchronises, collects garbage and empties the allocator's cache) is timed
    apart, for reference;
  - replay: CUDA events around one replay(), median of --replays (the buffer reset before each,
    outside the events), and the host time of the replay() call;
  - eager: the N ops launched one by one, events and host clock.
flowdsl side: see bench/torch_compare_bench.cu (build = declare + plan() + first
Runtime::launch, i.e. validate, lower, emit, instantiate with upload and launch).

Checked on both sides: the result after one pass of the chain equals the host's chain of
float32 products (PyTorch: the same ops on a CPU tensor), and the two sides' result sums agree.

Usage:
  python3 bench/torch_compare.py --flowdsl build/bench/torch_compare_bench --json torch_compare.json
  python3 bench/torch_compare.py --flowdsl build/bench/torch_compare_bench --quick   # smoke run
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def factors(n):
    return [1.0625 if i % 2 == 0 else 0.9375 for i in range(n)]


def load_torch():
    try:
        import torch  # noqa: F401  (imported here so that a missing torch is one clear message)
    except ImportError as e:
        sys.exit(f"torch_compare: PyTorch cannot be imported ({e}); run this with the python3 "
                 "that has torch (e.g. the H200 machine's python3, PyTorch 2.11)")
    import torch
    if not torch.cuda.is_available():
        sys.exit("torch_compare: torch.cuda.is_available() is False: no CUDA device for PyTorch")
    return torch


def make_input(torch, elements):
    # 1 + 0.001 * (i % 977), each step in float32 as the C++ side computes it.
    i = torch.arange(elements, dtype=torch.int64) % 977
    return i.to(torch.float32) * 0.001 + 1.0


def host_chain(torch, x0, fs):
    x = x0.clone()
    for a in fs:
        x.mul_(a)
    return x


def median(v):
    return statistics.median(v) if v else float("nan")


def torch_side(torch, n, elements, builds, replays):
    fs = factors(n)
    x0_cpu = make_input(torch, elements)
    want = host_chain(torch, x0_cpu, fs)
    x0 = x0_cpu.cuda()
    x = x0.clone()
    side = torch.cuda.Stream()
    # Warm-up on the side stream, as PyTorch's documentation asks before a capture.
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for a in fs[: min(n, 8)]:
            x.mul_(a)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    capture, first_replay, build = [], [], []
    graph = None
    errors = []
    for _ in range(builds):
        graph = None  # the previous graph is released before the next is built
        x.copy_(x0)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        t0 = time.perf_counter()
        with torch.cuda.stream(side):
            g.capture_begin()
            for a in fs:
                x.mul_(a)
            g.capture_end()
        t1 = time.perf_counter()
        g.replay()
        t2 = time.perf_counter()
        torch.cuda.synchronize()
        capture.append((t1 - t0) * 1e6)
        first_replay.append((t2 - t1) * 1e6)
        build.append((t2 - t0) * 1e6)
        errors.append(rel_error(torch, x.cpu(), want))
        graph = g
    result_sum = float(x.cpu().double().sum())

    # The context manager as users write it, for reference (it also synchronises, runs
    # gc.collect() and empties the caching allocator's cache before capturing).
    context = []
    for _ in range(builds):
        torch.cuda.synchronize()
        g2 = torch.cuda.CUDAGraph()
        t0 = time.perf_counter()
        with torch.cuda.graph(g2):
            for a in fs:
                x.mul_(a)
        t1 = time.perf_counter()
        context.append((t1 - t0) * 1e6)
        del g2

    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed(runs, warmup, body):
        """Event and host times (µs) of body() after x is reset, the first `warmup` runs dropped."""
        gpu, host = [], []
        for r in range(runs + warmup):
            x.copy_(x0)
            start.record()
            h0 = time.perf_counter()
            body()
            h1 = time.perf_counter()
            stop.record()
            stop.synchronize()
            if r >= warmup:
                gpu.append(start.elapsed_time(stop) * 1000.0)
                host.append((h1 - h0) * 1e6)
        return gpu, host

    replay_gpu, replay_call = timed(replays, 2, graph.replay)
    errors.append(rel_error(torch, x.cpu(), want))

    def eager():
        for a in fs:
            x.mul_(a)

    eager_gpu, eager_host = timed(5, 1, eager)
    errors.append(rel_error(torch, x.cpu(), want))
    del graph
    max_error = max(errors)
    return {
        "capture + instantiate, host": median(capture),
        "first replay, host": median(first_replay),
        "build, host": median(build),
        "torch.cuda.graph block, host": median(context),
        "replay, gpu": median(replay_gpu),
        "replay call, host": median(replay_call),
        "eager, gpu": median(eager_gpu),
        "eager, host": median(eager_host),
        "result_sum": result_sum,
        "max_rel_error": max_error,
        "ok": max_error <= 1e-5,
    }


def rel_error(torch, got, want):
    err = ((got.double() - want.double()).abs() / want.double().abs()).max().item()
    return 1.0 if err != err else err  # NaN counts as wrong


def flowdsl_side(binary, sizes, elements, builds, replays):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "flowdsl.json")
        cmd = [binary, "--n", ",".join(str(n) for n in sizes), "--elements", str(elements),
               "--builds", str(builds), "--replays", str(replays), "--json", path]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode not in (0, 1) or not os.path.exists(path):
            sys.exit(f"torch_compare: {' '.join(cmd)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
        with open(path) as f:
            report = json.load(f)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
    out = {}
    for fig in report["figures"]:
        out.setdefault((fig["variant"], fig["n"]), {})[fig["figure"]] = fig["us"]
    for check in report["checks"]:
        out[(check["variant"], check["n"])].update(
            {"result_sum": check["result_sum"], "max_rel_error": check["max_rel_error"], "ok": check["ok"]})
    header = {k: report[k] for k in ("gpu", "driver_version", "runtime_version")}
    return out, header


def spread(values):
    """'median (min-max)' of the repetitions."""
    v = [x for x in values if x == x]
    if not v:
        return "-"
    m = statistics.median(v)
    if len(v) == 1:
        return f"{m:.3f}"
    return f"{m:.3f} ({min(v):.3f}-{max(v):.3f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flowdsl", required=True, help="path to the torch_compare_bench binary")
    ap.add_argument("--json", help="write every figure of every repetition here")
    ap.add_argument("--n", default="100,1000,2000", help="chain lengths, comma-separated")
    ap.add_argument("--repeats", type=int, default=3, help="repetitions of the whole comparison")
    ap.add_argument("--elements", type=int, default=4096, help="float32 elements of the buffer")
    ap.add_argument("--builds", type=int, default=5, help="builds per N and repetition (median)")
    ap.add_argument("--replays", type=int, default=50, help="replays per N and repetition (median)")
    ap.add_argument("--quick", action="store_true", help="smoke run: N = 10,100, one repetition")
    args = ap.parse_args()
    if args.quick:
        args.n, args.repeats, args.builds, args.replays = "10,100", 1, 2, 5
    sizes = [int(s) for s in args.n.split(",") if s]
    if not os.access(args.flowdsl, os.X_OK):
        sys.exit(f"torch_compare: {args.flowdsl} is not an executable (build the target torch_compare_bench)")
    torch = load_torch()

    runs = []  # per repetition: {"torch": {n: {...}}, "flowdsl": {variant: {n: {...}}}}
    header = {}
    for rep in range(args.repeats):
        run = {"torch": {}, "flowdsl": {}}
        for n in sizes:
            run["torch"][n] = torch_side(torch, n, args.elements, args.builds, args.replays)
        torch.cuda.synchronize()
        flow, header = flowdsl_side(args.flowdsl, sizes, args.elements, args.builds, args.replays)
        for (variant, n), figs in flow.items():
            run["flowdsl"].setdefault(variant, {})[n] = figs
        runs.append(run)
        print(f"repetition {rep + 1} of {args.repeats} done", file=sys.stderr)

    ok = True
    for run in runs:
        for n in sizes:
            t = run["torch"][n]
            ok = ok and t["ok"]
            for variant in run["flowdsl"]:
                f = run["flowdsl"][variant][n]
                ok = ok and f["ok"]
                if abs(f["result_sum"] - t["result_sum"]) > 1e-6 * abs(t["result_sum"]):
                    print(f"N = {n}: {variant} sum {f['result_sum']!r} differs from PyTorch's {t['result_sum']!r}",
                          file=sys.stderr)
                    ok = False

    def per_kernel(side, n, figure, variant=None):
        vals = []
        for run in runs:
            src = run["torch"][n] if side == "torch" else run["flowdsl"][variant][n]
            vals.append(src[figure] / n)
        return vals

    def ratio(n, figure, variant):
        return [run["torch"][n][figure] / run["flowdsl"][variant][n][figure] for run in runs]

    fl, fp = "flowdsl", "flowdsl, programmatic"
    print(f"\nGPU: {header.get('gpu', '?')}, driver {header.get('driver_version')}, runtime "
          f"{header.get('runtime_version')}; {args.elements} float32 elements, {args.repeats} repetitions: "
          "median (min-max)\n")
    print("Build, host µs per kernel (PyTorch: capture + instantiate + first replay call; flowdsl: declare + "
          "validate + lower + instantiate + first launch call)\n")
    print("| N | PyTorch capture + instantiate | PyTorch build | flowdsl build | flowdsl programmatic build "
          "| PyTorch / flowdsl |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in sizes:
        print(f"| {n} | {spread(per_kernel('torch', n, 'capture + instantiate, host'))} "
              f"| {spread(per_kernel('torch', n, 'build, host'))} | {spread(per_kernel('flowdsl', n, 'build, host', fl))} "
              f"| {spread(per_kernel('flowdsl', n, 'build, host', fp))} | {spread(ratio(n, 'build, host', fl))} |")
    print("\nReplay, GPU µs per kernel (CUDA events around one launch of the whole chain)\n")
    print("| N | PyTorch replay | flowdsl | flowdsl programmatic | PyTorch / flowdsl | PyTorch / flowdsl "
          "programmatic | PyTorch eager |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in sizes:
        print(f"| {n} | {spread(per_kernel('torch', n, 'replay, gpu'))} | {spread(per_kernel('flowdsl', n, 'replay, gpu', fl))} "
              f"| {spread(per_kernel('flowdsl', n, 'replay, gpu', fp))} | {spread(ratio(n, 'replay, gpu', fl))} "
              f"| {spread(ratio(n, 'replay, gpu', fp))} | {spread(per_kernel('torch', n, 'eager, gpu'))} |")
    print("\nLaunch call, host µs (whole chain): PyTorch replay() / flowdsl Runtime::launch hit")
    for n in sizes:
        tc = [run["torch"][n]["replay call, host"] for run in runs]
        fc = [run["flowdsl"][fl][n]["replay call, host"] for run in runs]
        print(f"  N = {n}: {spread(tc)} / {spread(fc)}")
    print("\nresults verified on both sides, sums agree" if ok else "\nRESULTS WRONG (see above)")

    if args.json:
        out = {
            "bench": "torch_compare",
            **header,
            "torch_version": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "elements": args.elements,
            "builds": args.builds,
            "replays": args.replays,
            "verified": ok,
            "runs": [{"torch": {str(n): v for n, v in run["torch"].items()},
                      "flowdsl": {var: {str(n): v for n, v in d.items()} for var, d in run["flowdsl"].items()}}
                     for run in runs],
        }
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
