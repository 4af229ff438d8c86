#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compares two runs of a bench's JSON output (flowdsl_bench --json, kernels_bench --json), figure by
figure: the value after / before for every figure both hold, sorted by how far it moved, and a
summary (median ratio, how many moved more than the threshold).

    python3 bench/compare_figures.py BEFORE.json AFTER.json [--threshold 0.05] [--all] [--relative-to raw]

Times are compared (us, ms): a ratio above 1 is slower after. Two runs on different days (or hosts)
move every figure alike; --relative-to VARIANT compares each flowdsl_bench figure as a ratio to
that variant's same figure in its own run (flowdsl / raw before against flowdsl / raw after).
"""
import argparse
import json
import statistics


def figures(path, relative_to=None):
    with open(path) as f:
        data = json.load(f)
    out = {}
    rows = data.get("figures", [])  # flowdsl_bench
    base = {(r["figure"], r["n"], r["width"], r["k"]): r["us"] for r in rows if r["variant"] == relative_to}
    for row in rows:
        key = f'{row["figure"]} | {row["variant"]} | n={row["n"]} w={row["width"]} k={row["k"]}'
        if relative_to is None:
            out[key] = row["us"]
        elif row["variant"] != relative_to and base.get((row["figure"], row["n"], row["width"], row["k"]), 0) > 0:
            out[key + f" / {relative_to}"] = row["us"] / base[(row["figure"], row["n"], row["width"], row["k"])]
    for row in data.get("rows", []):  # kernels_bench
        out[row["name"]] = row["ms"]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--threshold", type=float, default=0.05, help="a move larger than this fraction is listed")
    parser.add_argument("--all", action="store_true", help="list every figure")
    parser.add_argument("--relative-to", metavar="VARIANT", help="compare ratios to this variant of the same run (raw)")
    args = parser.parse_args()
    before, after = figures(args.before, args.relative_to), figures(args.after, args.relative_to)
    common = [k for k in before if k in after and before[k] > 0]
    ratios = {k: after[k] / before[k] for k in common}
    moved = [k for k in common if abs(ratios[k] - 1) > args.threshold]
    for k in sorted(common if args.all else moved, key=lambda k: -abs(ratios[k] - 1)):
        print(f"{ratios[k]:6.3f}  {before[k]:12.4f} -> {after[k]:12.4f}  {k}")
    if common:
        print(f"{len(common)} figures in both; median after/before {statistics.median(ratios.values()):.3f}; "
              f"{len(moved)} moved more than {args.threshold:.0%}"
              f" ({sum(ratios[k] > 1 for k in moved)} slower, {sum(ratios[k] < 1 for k in moved)} faster)")
    only = sorted(set(before) ^ set(after))
    if only:
        print(f"{len(only)} figures in one run only, e.g. {only[0]}")


if __name__ == "__main__":
    main()
