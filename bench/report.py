#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Turns flowdsl_bench's or conditional_bench's JSON into the Markdown tables of
docs/performance.md, with each figure checked against its target.
Usage: python3 bench/report.py bench.json"""
import json
import sys


def conditional_tables(data):
    """conditional_bench: WHILE iterations (GPU) and the hit launch of a nested graph (host)."""
    fig = {(f["figure"], f["variant"], f["width"]): (f["n"], f["us"]) for f in data["figures"]}
    print(f"GPU: {data['gpu']}, driver {data['driver_version']}, runtime {data['runtime_version']}.\n")
    print("| figure | N | raw (µs) | flowdsl (µs) | ratio | target |")
    print("| --- | --- | --- | --- | --- | --- |")
    rows = [("WHILE iteration, GPU (body: 1 kernel)", "while iteration gpu", 1, 1.05),
            ("WHILE iteration, GPU (body: kernel + decide)", "while iteration gpu", 2, 1.05),
            ("hit launch, host (kernel, child graph, IF)", "hit launch host", 0, 1.10)]
    for label, figure, width, target in rows:
        n, raw = fig[(figure, "raw", width)]
        flow = fig[(figure, "flowdsl", width)][1]
        mark = "" if flow <= target * raw else " ✗"
        print(f"| {label} | {n} | {raw:.3f} | {flow:.3f} | {flow / raw:.3f}{mark} | ≤ {target:.2f} |")


def main(path):
    data = json.load(open(path))
    if data.get("bench") == "conditional":
        conditional_tables(data)
        return
    fig = {}
    for f in data["figures"]:
        fig[(f["figure"], f["variant"], f["n"], f["width"], f["k"])] = f["us"]
    shapes = sorted({(f["n"], f["width"]) for f in data["figures"] if f["figure"] == "build"})

    def get(figure, variant, n, w, k=0):
        return fig.get((figure, variant, n, w, k), 0.0)

    print(f"GPU: {data['gpu']}, driver {data['driver_version']}, runtime {data['runtime_version']}.\n")
    print("| N | width | build+lower+instantiate raw / flowdsl (µs) | ratio (≤ 1.15) "
          "| hit launch raw / flowdsl (µs) | ratio (≤ 1.10) | replay per node raw / flowdsl (µs) | ratio (0.97–1.03) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, w in shapes:
        raw_b = get("build", "raw", n, w) + get("instantiate+launch", "raw", n, w)
        flow_b = get("build", "flowdsl", n, w) + get("validate+lower", "flowdsl", n, w) + get("instantiate+launch", "flowdsl", n, w)
        raw_h, flow_h = get("hit launch host", "raw", n, w), get("hit launch host", "flowdsl", n, w)
        raw_r, flow_r = get("replay gpu", "raw", n, w) / n, get("replay gpu", "flowdsl", n, w) / n
        mark = lambda ok: "" if ok else " ✗"
        print(f"| {n} | {w} | {raw_b:.1f} / {flow_b:.1f} | {flow_b / raw_b:.3f}{mark(flow_b <= 1.15 * raw_b)} "
              f"| {raw_h:.2f} / {flow_h:.2f} | {flow_h / raw_h:.3f}{mark(flow_h <= 1.10 * raw_h)} "
              f"| {raw_r:.3f} / {flow_r:.3f} | {flow_r / raw_r:.3f}{mark(0.97 <= flow_r / raw_r <= 1.03)} |")

    print("\nWhere build+lower+instantiate goes (µs): raw adds + instantiate vs flowdsl declare, "
          "validate+lower, and the backend's emission + instantiation alone.\n")
    print("| N | width | raw adds | raw instantiate+launch | flowdsl declare | flowdsl validate+lower | flowdsl backend emit+instantiate | flowdsl runtime miss (emit+instantiate+launch) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, w in shapes:
        print(f"| {n} | {w} | {get('build', 'raw', n, w):.1f} | {get('instantiate+launch', 'raw', n, w):.1f} "
              f"| {get('build', 'flowdsl', n, w):.1f} | {get('validate+lower', 'flowdsl', n, w):.1f} "
              f"| {get('backend emit+instantiate', 'flowdsl', n, w):.1f} | {get('instantiate+launch', 'flowdsl', n, w):.1f} |")

    print("\nUpdate of k changed nodes of N, then launch (host µs). Target: flowdsl's update cost "
          "(its time minus its hit launch) ≤ 1.2 × k × raw's per-node update + 1 µs, where raw's per-node "
          "update is (raw time − raw hit launch) / k.\n")
    print("| N | width | k | raw | flowdsl | flowdsl update | target | met |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, w in shapes:
        for k in (1, 10, n):
            raw_k = get("update k + launch host", "raw", n, w, k)
            flow_k = get("update k + launch host", "flowdsl", n, w, k)
            if raw_k == 0 or (k == n and n == 10):
                continue
            per_node = max(raw_k - get("hit launch host", "raw", n, w), 0.0) / k
            update = flow_k - get("hit launch host", "flowdsl", n, w)
            target = 1.2 * k * per_node + 1.0
            print(f"| {n} | {w} | {k} | {raw_k:.2f} | {flow_k:.2f} | {update:.2f} | {target:.2f} | "
                  f"{'yes' if update <= target else 'no'} |")

    print("\nAgainst stream launches and stream capture (flowdsl as the reference: ratio = other / flowdsl).\n")
    print("| N | width | stream replay wall / flowdsl | capture build+instantiate / flowdsl build+lower+instantiate |")
    print("| --- | --- | --- | --- |")
    for n, w in shapes:
        flow_b = get("build", "flowdsl", n, w) + get("validate+lower", "flowdsl", n, w) + get("instantiate+launch", "flowdsl", n, w)
        cap_b = get("build", "capture", n, w) + get("instantiate+launch", "capture", n, w)
        print(f"| {n} | {w} | {get('replay wall', 'stream', n, w) / get('replay wall', 'flowdsl', n, w):.2f} "
              f"| {cap_b / flow_b:.2f} |")

    rebuilds = sorted({(f["n"], f["k"]) for f in data["figures"] if f["figure"] == "rebuild 10% + launch host"})
    if rebuilds:
        print("\nRebuild: a chain of N tiny kernels built from scratch with k nodes of new arguments, then launched "
              "(host µs; raw: nodes added to a new cudaGraph, cudaGraphExecUpdate, launch; flowdsl: a new Graph "
              "declared, planned and launched on the cached executable, whose values it compares).\n")
        print("| N | k | raw | flowdsl | ratio (≤ 0.50) | raw: add nodes / exec update + launch "
              "| flowdsl: declare / validate + lower / launch |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for n, k in rebuilds:
            raw, flow = get("rebuild 10% + launch host", "raw", n, 1, k), get("rebuild 10% + launch host", "flowdsl", n, 1, k)
            mark = "" if flow <= 0.5 * raw else " ✗"
            print(f"| {n} | {k} | {raw:.1f} | {flow:.1f} | {flow / raw:.3f}{mark} "
                  f"| {get('rebuild: add nodes', 'raw', n, 1, k):.1f} / {get('rebuild: exec update + launch', 'raw', n, 1, k):.1f} "
                  f"| {get('rebuild: declare', 'flowdsl', n, 1, k):.1f} / {get('rebuild: validate+lower', 'flowdsl', n, 1, k):.1f} "
                  f"/ {get('rebuild: launch (value diff + updates)', 'flowdsl', n, 1, k):.1f} |")

    lanes = sorted({(f["n"], f["width"], f["k"]) for f in data["figures"] if f["figure"] == "streams: 8 lanes, wall"})
    if lanes:
        print("\nStreams: threads, each with its own stream, launching a chain of N tiny kernels k times (wall ms from "
              "the start to every stream drained; throughput ratio = raw per stream / flowdsl).\n")
        print("| threads | N | k | raw, an executable per stream | raw, one shared executable | flowdsl, one Runtime "
              "| throughput flowdsl / raw (≥ 0.90) |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for n, w, k in lanes:
            raw = get("streams: 8 lanes, wall", "raw", n, w, k)
            shared = get("streams: 8 lanes, wall", "raw shared", n, w, k)
            flow = get("streams: 8 lanes, wall", "flowdsl", n, w, k)
            mark = "" if raw >= 0.9 * flow else " ✗"
            print(f"| {w} | {n} | {k} | {raw / 1000:.2f} | {shared / 1000:.2f} | {flow / 1000:.2f} | {raw / flow:.3f}{mark} |")

    hits = [(n, w) for n, w in shapes if get("hit launch host", "raw", n, w) > 0]
    if hits:
        print("\nHit launch, host µs (median of alternating samples): flowdsl's work beyond raw's cudaGraphLaunch.\n")
        print("| N | width | raw | flowdsl | ratio (≤ 1.05) | flowdsl − raw (µs) |")
        print("| --- | --- | --- | --- | --- | --- |")
        for n, w in hits:
            raw_h, flow_h = get("hit launch host", "raw", n, w), get("hit launch host", "flowdsl", n, w)
            mark = "" if flow_h <= 1.05 * raw_h else " ✗"
            print(f"| {n} | {w} | {raw_h:.2f} | {flow_h:.2f} | {flow_h / raw_h:.3f}{mark} | {flow_h - raw_h:+.2f} |")

    profiled = [(n, w) for n, w in shapes if get("hit launch host", "flowdsl, profiler gone", n, w) > 0]
    if profiled:
        print("\nHit launch and profiling (host µs, one run). flowdsl: the profiler compiled in, never used "
              "(Runtime::launch has no hook); after a Profiler: CUPTI loaded, nothing enabled; profiled: "
              "Profiler::launch with CUPTI recording.\n")
        print("| N | width | raw / flowdsl | ratio | raw / flowdsl after a Profiler | ratio | profiled | profiled / flowdsl |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for n, w in profiled:
            raw_h, flow_h = get("hit launch host", "raw", n, w), get("hit launch host", "flowdsl", n, w)
            raw_g = get("hit launch host", "raw, profiler gone", n, w)
            flow_g = get("hit launch host", "flowdsl, profiler gone", n, w)
            prof = get("hit launch host", "profiled", n, w)
            print(f"| {n} | {w} | {raw_h:.2f} / {flow_h:.2f} | {flow_h / raw_h:.3f} | {raw_g:.2f} / {flow_g:.2f} "
                  f"| {flow_g / raw_g:.3f} | {prof:.2f} | {prof / flow_h:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
