#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The head-of-line plot of the serving sample: latency p50 and p99 against the arrival rate,
one line per mode, and the throughput served against the rate offered, from `serving --json`.
Latencies of runs that left requests unserved are lower bounds: drawn with hollow markers.

Usage: python3 samples/plot_serving.py serving.json [-o docs/serving.svg]
Needs matplotlib (Debian: apt-get install python3-matplotlib)."""
import argparse
import json
import sys

STYLE = {  # mode: (label, colour)
    "batch1": ("batch 1, graphs (bf16)", "tab:red"),
    "dynamic_graph": ("dynamic batching, graphs (bf16)", "tab:blue"),
    "dynamic_stream": ("dynamic batching, stream launches (bf16)", "tab:orange"),
    "dynamic_f32": ("dynamic batching, graphs (f32)", "tab:green"),
}


def by_mode(runs):
    """Runs grouped by mode, in the order they appear, each group sorted by rate."""
    modes = {}
    for run in runs:
        modes.setdefault(run["mode"], []).append(run)
    return {mode: sorted(rs, key=lambda r: r["rate_rps"]) for mode, rs in modes.items()}


def plot(data, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_serving.py: matplotlib is missing (apt-get install python3-matplotlib, or pip install matplotlib)")

    fig, (lat, thr) = plt.subplots(1, 2, figsize=(13, 5))
    for mode, runs in by_mode(data["runs"]).items():
        label, colour = STYLE.get(mode, (mode, None))
        rates = [r["rate_rps"] for r in runs]
        for key, line, marker in (("p99", "-", "o"), ("p50", "--", "s")):
            values = [r["latency_us"][key] for r in runs]
            lines = lat.plot(rates, values, line, color=colour, label=f"{label} {key}")
            colour = lines[0].get_color()
            for rate, value, run in zip(rates, values, runs):
                hollow = run["latency_us"]["lower_bounds"]
                lat.plot(rate, value, marker, color=colour, markerfacecolor="none" if hollow else colour)
        thr.plot(rates, [r["throughput"]["requests_per_s"] for r in runs], "o-", color=colour, label=label)

    options = data["options"]
    layers = "-".join(str(w) for w in options["layers"])
    rows = options["request_rows"]
    lat.set(xscale="log", yscale="log", xlabel="arrival rate (requests/s)", ylabel="latency, arrival to completion (µs)",
            title="head-of-line blocking: p99 (solid), p50 (dashed); hollow: lower bound")
    lat.grid(True, which="both", alpha=0.3)
    lat.legend(fontsize=7)
    offered = sorted({r["rate_rps"] for r in data["runs"]})
    thr.plot(offered, offered, ":", color="grey", label="offered")
    thr.set(xscale="log", yscale="log", xlabel="arrival rate (requests/s)", ylabel="requests served per second",
            title="throughput")
    thr.grid(True, which="both", alpha=0.3)
    thr.legend(fontsize=7)
    fig.suptitle(f"serving: MLP {layers}, {rows[0]}..{rows[1]} rows a request, buckets {options['buckets']}, "
                 f"max wait {options['max_wait_us']:g} µs, {options['in_flight']} in flight — {data['gpu']}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="the file serving --json wrote")
    parser.add_argument("-o", "--output", default="docs/serving.svg", help="the plot (SVG; another suffix picks another format)")
    args = parser.parse_args()
    with open(args.json) as f:
        plot(json.load(f), args.output)


if __name__ == "__main__":
    main()
