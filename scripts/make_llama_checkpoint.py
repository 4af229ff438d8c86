#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a random-weight Llama checkpoint (config.json and model.safetensors) as Hugging Face lays it out.

The tensors have Hugging Face's names and shapes (LlamaForCausalLM), in bfloat16: weights drawn
from N(0, 0.02), norm weights from 1 + N(0, 0.02), each tensor from its own generator seeded by
(--seed, its index), so a tensor's values do not depend on the sizes of the others. The data is
written a chunk at a time, so the 1B preset (2.5 GB) never needs the whole model in memory.

    python3 scripts/make_llama_checkpoint.py --preset tiny --out /tmp/tiny_ckpt
    python3 scripts/make_llama_checkpoint.py --preset llama-3.2-1b --out /tmp/llama1b --seed 3
    python3 scripts/make_llama_checkpoint.py --preset tiny --layers 4 --no-tie --out /tmp/t4

Needs only NumPy.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

PRESETS = {
    "llama-3.2-1b": dict(layers=16, hidden=2048, heads=32, kv_heads=8, head_dim=64, intermediate=8192,
                         vocab=128256, tie=True, rope_theta=500000.0, rms_norm_eps=1e-5,
                         max_position_embeddings=131072,
                         # Llama 3.2's own: long wavelengths stretched 32 times (rope_kv_append's
                         # inv_freq comes from flowdsl::kernels::rope_inverse_frequencies with these).
                         rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "tiny": dict(layers=2, hidden=256, heads=4, kv_heads=2, head_dim=64, intermediate=512, vocab=1024,
                 tie=True, rope_theta=500000.0, rms_norm_eps=1e-5, max_position_embeddings=2048),
}

STDDEV = 0.02
CHUNK_ELEMENTS = 1 << 23  # float32 values generated at once: 32 MB


def to_bfloat16_bits(values):
    """The bfloat16 bits (uint16) of float32 `values`: the upper half, rounded to nearest even."""
    bits = values.astype(np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    # NaN stays NaN (rounding could carry it into infinity).
    return np.where(np.isnan(values), np.uint32(0x7FC0), rounded).astype("<u2")


def tensor_list(c):
    """[(name, shape, is_norm)] in the order Hugging Face's model declares them."""
    hidden, q_out, kv_out = c["hidden"], c["heads"] * c["head_dim"], c["kv_heads"] * c["head_dim"]
    tensors = [("model.embed_tokens.weight", (c["vocab"], hidden), False)]
    for i in range(c["layers"]):
        p = f"model.layers.{i}."
        tensors += [
            (p + "input_layernorm.weight", (hidden,), True),
            (p + "self_attn.q_proj.weight", (q_out, hidden), False),
            (p + "self_attn.k_proj.weight", (kv_out, hidden), False),
            (p + "self_attn.v_proj.weight", (kv_out, hidden), False),
            (p + "self_attn.o_proj.weight", (hidden, q_out), False),
            (p + "post_attention_layernorm.weight", (hidden,), True),
            (p + "mlp.gate_proj.weight", (c["intermediate"], hidden), False),
            (p + "mlp.up_proj.weight", (c["intermediate"], hidden), False),
            (p + "mlp.down_proj.weight", (hidden, c["intermediate"]), False),
        ]
    tensors.append(("model.norm.weight", (hidden,), True))
    if not c["tie"]:
        tensors.append(("lm_head.weight", (c["vocab"], hidden), False))
    return tensors


def header_bytes(tensors):
    """The safetensors header (JSON, padded with spaces so that the data starts at a multiple of 8)."""
    entries, offset = {}, 0
    for name, shape, _ in tensors:
        size = 2 * int(np.prod(shape, dtype=np.int64))
        entries[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    entries["__metadata__"] = {"format": "pt"}
    text = json.dumps(entries, separators=(",", ":")).encode("utf-8")
    return text + b" " * (-(8 + len(text)) % 8), offset


def write_tensor(out, shape, is_norm, rng):
    """Writes one tensor's bfloat16 values, CHUNK_ELEMENTS at most at a time."""
    total = int(np.prod(shape, dtype=np.int64))
    for start in range(0, total, CHUNK_ELEMENTS):
        values = rng.standard_normal(min(CHUNK_ELEMENTS, total - start), dtype=np.float32) * np.float32(STDDEV)
        if is_norm:
            values += np.float32(1.0)
        out.write(to_bfloat16_bits(values).tobytes())


def config_json(c):
    """Hugging Face's LlamaConfig for the sizes `c`."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": c["hidden"],
        "intermediate_size": c["intermediate"],
        "num_hidden_layers": c["layers"],
        "num_attention_heads": c["heads"],
        "num_key_value_heads": c["kv_heads"],
        "head_dim": c["head_dim"],
        "vocab_size": c["vocab"],
        "rms_norm_eps": c["rms_norm_eps"],
        "rope_theta": c["rope_theta"],
        "max_position_embeddings": c["max_position_embeddings"],
        "rope_scaling": c.get("rope_scaling"),
        "tie_word_embeddings": c["tie"],
        "attention_bias": False,
        "mlp_bias": False,
        "initializer_range": STDDEV,
        "torch_dtype": "bfloat16",
        "hidden_act": "silu",
    }


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--out", required=True, help="folder to write config.json and model.safetensors into")
    parser.add_argument("--seed", type=int, default=0)
    sizes = parser.add_argument_group("sizes (override the preset's)")
    for flag, key, kind in [("--layers", "layers", int), ("--hidden", "hidden", int), ("--heads", "heads", int),
                            ("--kv-heads", "kv_heads", int), ("--head-dim", "head_dim", int),
                            ("--intermediate", "intermediate", int), ("--vocab", "vocab", int),
                            ("--rope-theta", "rope_theta", float), ("--rms-norm-eps", "rms_norm_eps", float),
                            ("--max-position-embeddings", "max_position_embeddings", int)]:
        sizes.add_argument(flag, dest=key, type=kind)
    tie = sizes.add_mutually_exclusive_group()
    tie.add_argument("--tie", dest="tie", action="store_true", default=None, help="lm_head shares embed_tokens")
    tie.add_argument("--no-tie", dest="tie", action="store_false", help="write lm_head.weight")
    args = parser.parse_args(argv)
    config = dict(PRESETS[args.preset])
    config.update({k: v for k, v in vars(args).items() if k in config and v is not None})
    for key in ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab"):
        if config[key] < 1:
            parser.error(f"--{key.replace('_', '-')} must be at least 1")
    if config["heads"] % config["kv_heads"] != 0:
        parser.error(f"{config['heads']} heads are not a multiple of {config['kv_heads']} key-value heads")
    return args, config


def main(argv):
    args, c = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    tensors = tensor_list(c)
    header, data_bytes = header_bytes(tensors)
    path = os.path.join(args.out, "model.safetensors")
    partial = path + ".partial"  # renamed when complete: a reader never sees half a file
    with open(partial, "wb") as out:
        out.write(struct.pack("<Q", len(header)))
        out.write(header)
        for index, (_, shape, is_norm) in enumerate(tensors):
            write_tensor(out, shape, is_norm, np.random.default_rng([args.seed, index]))
        if out.tell() != 8 + len(header) + data_bytes:
            raise RuntimeError(f"wrote {out.tell()} bytes, expected {8 + len(header) + data_bytes}")
    os.replace(partial, path)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config_json(c), f, indent=2)
        f.write("\n")
    parameters = data_bytes // 2
    print(f"{args.out}: {len(tensors)} tensors, {parameters:,} parameters, {8 + len(header) + data_bytes:,} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
