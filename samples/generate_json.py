#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the JSON twins of the kernel-library samples (mlp_inference, preprocess, rl_cartpole,
heat2d) and the small .npy files they read (samples/data/). Standard library only.

    python3 samples/generate_json.py

The graphs are the C++ samples' graphs at smaller sizes; nodes name no launch shape, so that
each gets the one the kernel library's launcher picks and the same graph built in C++ has the
same topology hash (tests/gpu/test_json_gpu.cu checks it, and the outputs).
"""
import json
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")


# ---------------------------------------------------------------- kernel choices ---------------
# Nodes of built-in kernels name no launch shape: each kernel's own rule (the one its C++
# launcher applies) picks it from the arguments. What remains to choose is the variant.
def blocks_for(work, per_block):
    return max(1, (work + per_block - 1) // per_block)


def row_kernel(name, suffix, cols):
    """A warp per row up to 1024 columns, else a block per row: the variant the launcher picks."""
    return name + (".warp." if cols <= 1024 else ".") + suffix


def write_npy(name, descr, fmt, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (descr, len(values))
    total = (10 + len(header) + 1 + 63) // 64 * 64
    header = header + " " * (total - 10 - len(header) - 1) + "\n"
    with open(os.path.join(DATA, name), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("ascii"))
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))
    return "data/" + name


def write_graph(name, buffers, nodes, items_per_launch=None):
    lines = ['{', '  "version": 1,', '  "name": %s,' % json.dumps(name), '  "buffers": [']
    lines += ["    " + json.dumps(b) + ("," if i + 1 < len(buffers) else "") for i, b in enumerate(buffers)]
    lines += ["  ],"]
    if items_per_launch is not None:  # for `flowdsl bench`: items/s
        lines += ['  "items_per_launch": %d,' % items_per_launch]
    lines += ['  "nodes": [']
    lines += ["    " + json.dumps(n) + ("," if i + 1 < len(nodes) else "") for i, n in enumerate(nodes)]
    lines += ["  ]", "}", ""]
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        f.write("\n".join(lines))


def buf(name, type_, count, init=None, output=False):
    b = {"name": name, "type": type_, "count": count}
    if init is not None:
        b["init"] = init
    if output:
        b["output"] = True
    return b


def uniform(low, high, seed):
    return {"kind": "uniform", "low": low, "high": high, "seed": seed}


def kernel(name, kernel_name, args, after=None):
    node = {"name": name, "kind": "kernel", "kernel": kernel_name, "args": args}
    if after:
        node["after"] = after
    return node


def at(buffer, offset):
    return {"buffer": buffer, "offset": offset}


def offsets_of(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


# ---------------------------------------------------------------- samples ---------------------
def mlp_inference():
    batch, width, hidden, classes = 128, 256, 512, 16
    rng = random.Random(100)
    offsets = offsets_of(rng.randint(1, width + 32) for _ in range(batch))  # some requests are cut at width
    buffers = [
        buf("values", "f32", offsets[-1], uniform(-1.0, 1.0, 1100)),
        buf("offsets", "i32", batch + 1, {"kind": "npy", "file": write_npy("mlp_offsets.npy", "<i4", "i", offsets)}),
        buf("w1", "bf16", width * hidden, uniform(-1.0 / 16, 1.0 / 16, 1)),
        buf("b1", "f32", hidden, uniform(-1.0, 1.0, 3)),
        buf("w2", "bf16", hidden * classes, uniform(-1.0 / 8, 1.0 / 8, 2)),
        buf("b2", "f32", classes, uniform(-1.0, 1.0, 4)),
        buf("padded", "f32", batch * width),
        buf("mask", "u8", batch * width),
        buf("x16", "bf16", batch * width),
        buf("h", "f32", batch * hidden),
        buf("h16", "bf16", batch * hidden),
        buf("logits", "f32", batch * classes),
        buf("probs", "f32", batch * classes, output=True),
        buf("classes", "i32", batch, output=True),
    ]
    softmax = row_kernel("softmax", "f32", classes)
    argmax = row_kernel("row_argmax", "f32", classes)
    nodes = [
        kernel("pad", "pad.f32", 
               {"batch": batch, "width": width, "pad_value": 0.0, "values": "values", "offsets": "offsets",
                "out": "padded", "mask": "mask"}),
        kernel("cast_in", "cast.f32.bf16", 
               {"n": batch * width, "x": "padded", "y": "x16"}, ["pad"]),
        kernel("linear1", "matmul.bf16", 
               {"m": batch, "n": hidden, "k": width, "a": "x16", "b": "w1", "bias": "b1", "activation": "gelu", "c": "h"},
               ["cast_in"]),
        kernel("cast_h", "cast.f32.bf16", 
               {"n": batch * hidden, "x": "h", "y": "h16"}, ["linear1"]),
        kernel("linear2", "matmul.bf16", 
               {"m": batch, "n": classes, "k": hidden, "a": "h16", "b": "w2", "bias": "b2", "activation": "none",
                "c": "logits"}, ["cast_h"]),
        kernel("softmax", softmax, {"rows": batch, "cols": classes, "x": "logits", "y": "probs"},
               ["linear2"]),
        kernel("argmax", argmax, {"rows": batch, "cols": classes, "x": "probs", "out": "classes"},
               ["softmax"]),
    ]
    write_graph("mlp_inference", buffers, nodes, items_per_launch=batch)  # requests


def preprocess():
    batch, width = 16, 3 * 64 * 64
    mean, stddev = 0.45, 0.25
    rng = random.Random(300)
    offsets = offsets_of(3 * rng.randint(40, 64) * rng.randint(40, 64) for _ in range(batch))
    n = batch * width
    buffers = [
        buf("pixels", "f32", offsets[-1], uniform(0.0, 255.0, 301)),
        buf("offsets", "i32", batch + 1,
            {"kind": "npy", "file": write_npy("preprocess_offsets.npy", "<i4", "i", offsets)}),
        buf("bias", "f32", width, {"kind": "constant", "value": -mean / stddev}),
        buf("padded", "f32", n),
        buf("mask", "u8", n, output=True),
        buf("scaled", "f32", n),
        buf("normalised", "f32", n),
        buf("out", "bf16", n, output=True),
    ]
    nodes = [
        # The pad value is the mean pixel, so that padding normalises to zero.
        kernel("pad", "pad.f32", 
               {"batch": batch, "width": width, "pad_value": 255.0 * mean, "values": "pixels", "offsets": "offsets",
                "out": "padded", "mask": "mask"}),
        kernel("scale", "scale.f32", 
               {"n": n, "a": 1.0 / (255.0 * stddev), "x": "padded", "y": "scaled"}, ["pad"]),
        kernel("normalise", "bias_activation.f32", 
               {"rows": batch, "cols": width, "activation": "none", "x": "scaled", "bias": "bias", "y": "normalised"},
               ["scale"]),
        kernel("to_bf16", "cast.f32.bf16", {"n": n, "x": "normalised", "y": "out"},
               ["normalise"]),
    ]
    write_graph("preprocess", buffers, nodes, items_per_launch=batch)  # images


def rl_cartpole():
    envs, steps, max_steps, seed = 4096, 8, 500, 2026
    # The C++ sample's policy kernel, push towards where the pole falls
    # (action = theta + 0.5 theta_dot + 0.01 x_dot > 0), from built-in kernels: minus the
    # observation, padded into rows [-obs, 0], whose argmax is 1 exactly when obs > 0.
    buffers = [
        buf("state", "f32", 4 * envs, output=True),  # structure of arrays: x, x_dot, theta, theta_dot
        buf("reward_sum", "f32", envs, output=True),
        buf("episode_steps", "i32", envs, output=True),
        buf("episodes", "i32", envs, output=True),
        buf("done", "u8", envs, output=True),
        buf("action", "i32", envs, output=True),
        buf("neg_obs", "f32", envs),
        buf("rows", "f32", 2 * envs),
        buf("rows_mask", "u8", 2 * envs),
        buf("row_offsets", "i32", envs + 1,
            {"kind": "npy", "file": write_npy("cartpole_row_offsets.npy", "<i4", "i", list(range(envs + 1)))}),
    ]
    argmax = row_kernel("row_argmax", "f32", 2)
    nodes = [kernel("reset", "cartpole_reset", 
                    {"n": envs, "seed": seed, "state": "state", "reward_sum": "reward_sum",
                     "episode_steps": "episode_steps", "episodes": "episodes", "done": "done"})]
    last = "reset"
    for s in range(steps):
        p = "policy%d" % s
        nodes += [
            kernel(p + ".theta", "scale.f32", {"n": envs, "a": -1.0, "x": at("state", 8 * envs), "y": "neg_obs"},
                   [last]),
            kernel(p + ".theta_dot", "axpy.f32", 
                   {"n": envs, "a": -0.5, "x": at("state", 12 * envs), "y": "neg_obs"}, [p + ".theta"]),
            kernel(p + ".x_dot", "axpy.f32", {"n": envs, "a": -0.01, "x": at("state", 4 * envs), "y": "neg_obs"},
                   [p + ".theta_dot"]),
            kernel(p + ".rows", "pad.f32", 
                   {"batch": envs, "width": 2, "pad_value": 0.0, "values": "neg_obs", "offsets": "row_offsets",
                    "out": "rows", "mask": "rows_mask"}, [p + ".x_dot"]),
            kernel(p, argmax, {"rows": envs, "cols": 2, "x": "rows", "out": "action"}, [p + ".rows"]),
            kernel("step%d" % s, "cartpole_step", 
                   {"n": envs, "seed": seed, "max_steps": max_steps, "action": "action", "state": "state",
                    "reward_sum": "reward_sum", "episode_steps": "episode_steps", "episodes": "episodes", "done": "done"},
                   [p]),
        ]
        last = "step%d" % s
    write_graph("rl_cartpole", buffers, nodes)


def heat2d():
    nx, ny, steps, alpha = 128, 96, 20, 0.2
    partials = 1024  # flowdsl::kernels::sum_max_partials
    hot = [1.0 if ny // 4 <= i < 3 * ny // 4 and nx // 3 <= j < 2 * nx // 3 else 0.0 for i in range(ny) for j in range(nx)]
    buffers = [
        buf("initial", "f32", nx * ny, {"kind": "npy", "file": write_npy("heat2d_initial.npy", "<f4", "f", hot)}),
        buf("u", "f32", nx * ny, output=True),
        buf("v", "f32", nx * ny),
        buf("partials", "f64", steps * partials),
        buf("residuals", "f32", steps, output=True),
    ]
    blocks = min(blocks_for(nx, 32), 32) * min(blocks_for(ny, 8), 32)  # of the step's rule: the partials it writes
    nodes = [{"name": "load", "kind": "memcpy", "dst": "u", "src": "initial", "bytes": 4 * nx * ny}]
    last = "load"
    for s in range(steps):  # ping-pong between u and v: an even number of steps ends in u
        name = "heat%d" % s
        source, target = ("v", "u") if s % 2 else ("u", "v")
        nodes += [
            kernel(name + ".step", "heat2d_step",
                   {"nx": nx, "ny": ny, "alpha": alpha, "u": source, "u_next": target,
                    "partials": at("partials", 8 * partials * s)}, [last]),
            kernel(name, "sum_finish",
                   {"count": blocks, "partials": at("partials", 8 * partials * s), "take_sqrt": 1,
                    "out": at("residuals", 4 * s)}, [name + ".step"]),
        ]
        last = name + ".step"
    write_graph("heat2d", buffers, nodes)


if __name__ == "__main__":
    os.makedirs(DATA, exist_ok=True)
    mlp_inference()
    preprocess()
    rl_cartpole()
    heat2d()
