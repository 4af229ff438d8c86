#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's side of the Llama decode benchmark: one decode step, eager, as a CUDA graph and compiled.

The step is written plainly, the way gpt-fast writes it, on a checkpoint that
scripts/make_llama_checkpoint.py wrote (config.json and model.safetensors, Hugging Face's names):
embedding; per layer RMSNorm (as LlamaRMSNorm computes it), one fused q|k|v projection, rotary
embedding (rotate_half, Llama 3's frequency scaling when config.json's rope_scaling says llama3),
k and v written into a static cache [batch, kv_heads, cache_len, head_dim] with index_copy_,
F.scaled_dot_product_attention(enable_gqa=True) over the whole cache with a boolean mask, the
output projection, RMSNorm, one fused gate|up projection, SiLU, the down projection; the final
norm and the LM head on the last token, and argmax as the sampler, all inside one function.

Figures (GPU time from CUDA events around --repeat back-to-back steps after --warmup, in ms per
step; --runs N repeats each timing N times and keeps the list and its median):
  - per batch of --batches, every sequence at position --context of a --cache-len cache, T = 1:
    eager, CUDA graph (and its warm-up + capture wall time), torch.compile(mode="reduce-overhead",
    fullgraph=True) (and its warm-up wall time), optionally mode="max-autotune";
  - a prefill chunk: --prefill-seqs sequences x --prefill-chunk tokens, eager and CUDA graph;
  - the HBM floor: the bytes of the weights one decode step reads, over the device-to-device copy
    bandwidth measured in the same run;
  - with --bucket-pool: one CUDA graph per batch bucket 1, 2, 4, ..., 128 in one shared memory
    pool, the wall time of all captures and the memory the pool holds.
The CUDA graph's and the compiled step's next tokens are compared with eager's (reported only).

Usage, on the GPU machine (after `python3 scripts/make_llama_checkpoint.py --preset llama-3.2-1b
--out /tmp/llama1b`):
  python3 bench/llm_decode_torch.py --model /tmp/llama1b --json $OUT/torch.json
  python3 bench/llm_decode_torch.py --model /tmp/llama1b --batches 1,8 --no-compile --bucket-pool
  python3 bench/llm_decode_torch.py --model /tmp/tiny_ckpt --repeat 20 --runs 3    # a quick check
Needs PyTorch with CUDA and safetensors.
"""

import argparse
import gc
import glob
import json
import math
import os
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file
except ImportError as e:
    sys.exit(f"llm_decode_torch: {e}; run this with the python3 that has torch and safetensors")

DEVICE = "cuda"  # a module constant so that the step's arithmetic can be checked on a CPU too
CACHE_STD = 0.1  # random cache values: small, but not zero, so attention has real work to average
COPY_BYTES = 1 << 30  # the bandwidth probe copies 1 GiB
COPY_TIMES = 20
CAPTURE_WARMUP_CALLS = 3  # eager calls on a side stream before a capture, as PyTorch's docs do
POOL_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128]


# --------------------------------------------------------------------------------------------
# The model: weights and caches held as buffers of nn.Modules, so that torch.compile treats
# them as fixed-address inputs (no copies into CUDA-graph-owned memory each call).
# --------------------------------------------------------------------------------------------

class Layer(torch.nn.Module):
    def __init__(self, attn_norm, wqkv, wo, mlp_norm, wgu, wd):
        super().__init__()
        self.register_buffer("attn_norm", attn_norm)
        self.register_buffer("wqkv", wqkv)  # [q + k + v, hidden]: one GEMM instead of three
        self.register_buffer("wo", wo)
        self.register_buffer("mlp_norm", mlp_norm)
        self.register_buffer("wgu", wgu)  # [2 * intermediate, hidden]: gate rows, then up rows
        self.register_buffer("wd", wd)
        # Set by Llama.attach_caches; a cache belongs to a batch size, the weights do not.
        self.register_buffer("k_cache", None, persistent=False)
        self.register_buffer("v_cache", None, persistent=False)


class Llama(torch.nn.Module):
    def __init__(self, config, tensors, cache_len):
        super().__init__()
        self.hidden = config["hidden_size"]
        self.heads = config["num_attention_heads"]
        self.kv_heads = config.get("num_key_value_heads", self.heads)
        self.head_dim = config.get("head_dim") or self.hidden // self.heads
        self.eps = float(config.get("rms_norm_eps", 1e-5))
        self.tied = "lm_head.weight" not in tensors
        self.cache_len = cache_len

        self.register_buffer("embed", tensors.pop("model.embed_tokens.weight"))
        self.register_buffer("norm", tensors.pop("model.norm.weight"))
        if not self.tied:
            self.register_buffer("lm_head", tensors.pop("lm_head.weight"))
        layers = []
        for i in range(config["num_hidden_layers"]):
            def take(name, prefix=f"model.layers.{i}."):
                return tensors.pop(prefix + name)  # popped: the unfused parts are freed once fused

            wqkv = torch.cat([take("self_attn.q_proj.weight"), take("self_attn.k_proj.weight"),
                              take("self_attn.v_proj.weight")], dim=0)
            wgu = torch.cat([take("mlp.gate_proj.weight"), take("mlp.up_proj.weight")], dim=0)
            layers.append(Layer(take("input_layernorm.weight"), wqkv, take("self_attn.o_proj.weight"),
                                take("post_attention_layernorm.weight"), wgu, take("mlp.down_proj.weight")))
        self.layers = torch.nn.ModuleList(layers)
        if tensors:
            print(f"llm_decode_torch: ignoring {len(tensors)} unused tensors, e.g. {next(iter(tensors))}",
                  flush=True)

        # cos and sin of every cache position, float32, as Hugging Face's LlamaRotaryEmbedding
        # computes them (positions times inv_freq in float32, duplicated, then cos / sin); the
        # step gathers its positions' rows and rounds them to bfloat16 as HF does.
        inv_freq = rope_inverse_frequencies(config, self.head_dim).to(DEVICE)
        pos = torch.arange(cache_len, device=DEVICE, dtype=torch.float32)
        freqs = pos[:, None] * inv_freq[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        self.register_buffer("rope_cos", emb.cos())
        self.register_buffer("rope_sin", emb.sin())
        self.register_buffer("key_positions", torch.arange(cache_len, device=DEVICE))

        for t in self.buffers():
            mark_static(t)

    def attach_caches(self, k_caches, v_caches):
        for layer, k, v in zip(self.layers, k_caches, v_caches):
            layer.k_cache = k
            layer.v_cache = v
            mark_static(k)
            mark_static(v)

    def detach_caches(self):
        for layer in self.layers:
            layer.k_cache = None
            layer.v_cache = None

    def weight_bytes_per_step(self):
        """Bytes of weights one decode step reads: every layer's, the final norm's and the LM
        head's (the embedding when tied). The embedding gather reads only B rows: not counted."""
        total = sum(t.numel() * t.element_size() for layer in self.layers
                    for t in (layer.attn_norm, layer.wqkv, layer.wo, layer.mlp_norm, layer.wgu, layer.wd))
        head = self.embed if self.tied else self.lm_head
        return total + self.norm.numel() * self.norm.element_size() + head.numel() * head.element_size()


def mark_static(t):
    """Tells torch.compile's CUDA graphs that t keeps its address (so it is neither copied nor
    re-recorded); harmless for eager and for torch.cuda.CUDAGraph."""
    try:
        torch._dynamo.mark_static_address(t)
    except (AttributeError, TypeError):
        pass


def rope_inverse_frequencies(config, head_dim):
    """inv_freq [head_dim / 2] float32, as transformers computes it: the default
    theta^(-2j / head_dim), then _compute_llama3_parameters' scaling when rope_scaling says llama3."""
    theta = config.get("rope_theta")
    scaling = config.get("rope_scaling")
    params = config.get("rope_parameters")  # transformers 5's spelling, when a checkpoint uses it
    if isinstance(params, dict):
        theta = params.get("rope_theta", theta)
        scaling = scaling or params
    theta = float(theta if theta is not None else 10000.0)
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim))

    kind = (scaling or {}).get("rope_type", (scaling or {}).get("type"))
    if kind in (None, "default"):
        return inv_freq
    if kind != "llama3":
        sys.exit(f"llm_decode_torch: rope_scaling type {kind!r} is not implemented (only llama3)")
    factor = scaling["factor"]
    low_freq_factor = scaling["low_freq_factor"]
    high_freq_factor = scaling["high_freq_factor"]
    old_context_len = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    # Long wavelengths are divided by factor, short ones kept, those between interpolated.
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, inv_freq_llama)


def load_model(folder, cache_len):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    if not files:
        sys.exit(f"llm_decode_torch: no .safetensors file in {folder}")
    tensors = {}
    for path in files:
        tensors.update(load_file(path, device=DEVICE))
    for name, t in tensors.items():
        if t.dtype != torch.bfloat16:
            sys.exit(f"llm_decode_torch: {name} is {t.dtype}, expected bfloat16")
    model = Llama(config, tensors, cache_len)
    del tensors
    torch.cuda.synchronize()
    return config, model


# --------------------------------------------------------------------------------------------
# The step. One function (with small helpers Dynamo inlines), no host synchronisation, so that
# it can be captured into a CUDA graph and compiled with fullgraph=True.
# --------------------------------------------------------------------------------------------

def rms_norm(x, weight, eps):
    """LlamaRMSNorm: variance in float32, normalised value rounded back to bf16, then * weight."""
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def positions(model, input_pos):
    """cos, sin [1 or B, 1, T, head_dim] (bf16) and the attention mask [1 or B, 1, T, cache_len]:
    key j is visible to the query at position p when j <= p (causal inside a prefill chunk too)."""
    cos = model.rope_cos[input_pos].to(torch.bfloat16)
    sin = model.rope_sin[input_pos].to(torch.bfloat16)
    mask = model.key_positions <= input_pos[..., None]
    if input_pos.dim() == 1:  # [T]: every sequence at the same positions
        return cos[None, None], sin[None, None], mask[None, None]
    return cos[:, None], sin[:, None], mask[:, None]  # [B, T]


def write_cache(cache, input_pos, new):
    """new [B, kv_heads, T, head_dim] into cache at input_pos ([T], or [B, T] per sequence)."""
    if input_pos.dim() == 1:
        cache.index_copy_(2, input_pos, new)
    else:
        rows = torch.arange(cache.shape[0], device=cache.device)[:, None]
        cache[rows, :, input_pos] = new.transpose(1, 2)  # indexed as [B, T, kv_heads, head_dim]


def attention(model, layer, h, cos, sin, mask, input_pos):
    b, t, _ = h.shape
    q_size, kv_size = model.heads * model.head_dim, model.kv_heads * model.head_dim
    qkv = F.linear(h, layer.wqkv)  # h @ Wqkv.T
    q, k, v = qkv.split([q_size, kv_size, kv_size], dim=-1)
    q = q.view(b, t, model.heads, model.head_dim).transpose(1, 2)
    k = k.view(b, t, model.kv_heads, model.head_dim).transpose(1, 2)
    v = v.view(b, t, model.kv_heads, model.head_dim).transpose(1, 2)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    write_cache(layer.k_cache, input_pos, k)
    write_cache(layer.v_cache, input_pos, v)
    out = F.scaled_dot_product_attention(q, layer.k_cache, layer.v_cache, attn_mask=mask, enable_gqa=True)
    return F.linear(out.transpose(1, 2).reshape(b, t, q_size), layer.wo)


def mlp(layer, h):
    gate, up = F.linear(h, layer.wgu).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, layer.wd)


def decode_step(model, tokens, input_pos):
    """tokens [B, T] int64, input_pos [T] or [B, T] int64 -> the next token of each sequence,
    int64 [B] (argmax of the last position's logits). Writes the T new keys and values into
    the caches attached to model."""
    x = F.embedding(tokens, model.embed)
    cos, sin, mask = positions(model, input_pos)
    for layer in model.layers:
        x = x + attention(model, layer, rms_norm(x, layer.attn_norm, model.eps), cos, sin, mask, input_pos)
        x = x + mlp(layer, rms_norm(x, layer.mlp_norm, model.eps))
    # Only the last position's logits are sampled from, so only they are computed (for T = 1
    # this is all of them; for a prefill chunk it spares a [B * T, vocab] GEMM).
    h = rms_norm(x[:, -1, :], model.norm, model.eps)
    logits = F.linear(h, model.embed if model.tied else model.lm_head)
    return torch.argmax(logits, dim=-1)


# --------------------------------------------------------------------------------------------
# Inputs and caches.
# --------------------------------------------------------------------------------------------

def make_caches(model, batch, gen):
    """Per layer a k and a v cache [batch, kv_heads, cache_len, head_dim] of small random values."""
    shape = (batch, model.kv_heads, model.cache_len, model.head_dim)
    ks, vs = [], []
    for _ in model.layers:
        for caches in (ks, vs):
            caches.append(torch.empty(shape, dtype=torch.bfloat16, device=DEVICE).normal_(0.0, CACHE_STD, generator=gen))
    return ks, vs


def random_tokens(model, batch, length, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.embed.shape[0], (batch, length), generator=gen, dtype=torch.int64).to(DEVICE)


def free_memory():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


# --------------------------------------------------------------------------------------------
# Timing.
# --------------------------------------------------------------------------------------------

def gpu_ms_per_call(fn, args):
    """[ms per call] x args.runs: CUDA events around args.repeat back-to-back calls, after
    args.warmup calls. Back to back, so a host that launches slower than the GPU runs shows."""
    for _ in range(args.warmup):
        fn()
    torch.cuda.synchronize()
    figures = []
    for _ in range(args.runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.repeat):
            fn()
        stop.record()
        stop.synchronize()
        figures.append(start.elapsed_time(stop) / args.repeat)
    return figures


def put_figures(entry, key, figures):
    """entry[key] = the median, entry[key + '_runs'] = every run's figure."""
    entry[key] = statistics.median(figures)
    entry[key + "_runs"] = figures


_side_stream = None


def side_stream():
    """One side stream for every capture's warm-up: cuBLAS keeps a workspace per stream, and a
    new stream per capture would add one each time to the memory the bucket pool reports."""
    global _side_stream
    if _side_stream is None:
        _side_stream = torch.cuda.Stream()
    return _side_stream


def capture(model, tokens, input_pos, pool=None):
    """(graph, its output tensor, wall seconds of warm-up + capture). The warm-up calls run on a
    side stream first, as PyTorch's documentation asks (cuBLAS handles and workspaces, the
    allocator's blocks are set up before the capture)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    side = side_stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(CAPTURE_WARMUP_CALLS):
            decode_step(model, tokens, input_pos)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        out = decode_step(model, tokens, input_pos)
    torch.cuda.synchronize()
    return graph, out, time.perf_counter() - t0


def copy_bandwidth(args):
    """TB/s of dst.copy_(src) on two 1 GiB bf16 tensors: 2 x bytes (read + written) per copy."""
    n = COPY_BYTES // 2
    src = torch.ones(n, dtype=torch.bfloat16, device=DEVICE)
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize()
    figures = []
    for _ in range(args.runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(COPY_TIMES):
            dst.copy_(src)
        stop.record()
        stop.synchronize()
        seconds = start.elapsed_time(stop) / 1e3
        figures.append(2 * COPY_BYTES * COPY_TIMES / seconds / 1e12)
    del src, dst
    free_memory()
    return figures


def short_error(e):
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= 4000 else text[:4000] + " ..."


def cudagraph_skips():
    """How many compiled graphs inductor has run without CUDA graphs so far in this process."""
    try:
        from torch._dynamo.utils import counters
        return int(counters["inductor"]["cudagraph_skips"])
    except (ImportError, KeyError, AttributeError):
        return 0


def bench_compiled(model, tokens, input_pos, reference, mode, args):
    """torch.compile(decode_step, mode=mode, fullgraph=True): ms per step, the warm-up wall time
    (calls until two in a row take about the same time: the first compiles, the next records
    the CUDA graph, then replays), and whether its tokens equal eager's. Errors are reported."""
    torch.compiler.reset()  # a fresh compile for this batch and mode, nothing cached in Dynamo
    result = {}
    skips_before = cudagraph_skips()
    try:
        compiled = torch.compile(decode_step, mode=mode, fullgraph=True, dynamic=False)

        def call():
            # A new CUDA-graph-trees iteration per step: the previous step's output is not kept.
            torch.compiler.cudagraph_mark_step_begin()
            return compiled(model, tokens, input_pos)

        call_s = []
        while len(call_s) < 20:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = call()
            torch.cuda.synchronize()
            call_s.append(time.perf_counter() - t0)
            if len(call_s) >= 3 and max(call_s[-2:]) < 1.5 * min(call_s[-2:]):
                break
        result["warmup_s"] = sum(call_s)
        result["warmup_calls_s"] = call_s
        # Inductor runs without CUDA graphs (only a log line says so) when it finds a reason
        # to, e.g. an input it cannot keep in place: a figure without them is not comparable.
        result["cudagraph_skips"] = cudagraph_skips() - skips_before
        tokens_out = out.clone()
        result["tokens_match"] = bool(torch.equal(tokens_out, reference))
        result["tokens_mismatched"] = int((tokens_out != reference).sum())
        put_figures(result, "ms", gpu_ms_per_call(call, args))
        del compiled, out
    except Exception as e:  # noqa: BLE001 (any failure to build or run is a figure to report)
        result = {"error": short_error(e)}
        print(f"llm_decode_torch: torch.compile mode={mode} failed: {result['error'].splitlines()[0]}",
              flush=True)
    torch.compiler.reset()
    free_memory()
    return result


# --------------------------------------------------------------------------------------------
# The sections of the benchmark.
# --------------------------------------------------------------------------------------------

def bench_batch(model, batch, args, report):
    """Eager, CUDA graph and compiled decode steps for `batch` sequences at position --context."""
    gen = torch.Generator(device=DEVICE).manual_seed(args.seed + 1000 + batch)
    ks, vs = make_caches(model, batch, gen)
    model.attach_caches(ks, vs)
    tokens = random_tokens(model, batch, 1, args.seed + batch)
    input_pos = torch.tensor([args.context], dtype=torch.int64, device=DEVICE)
    entry = {}

    # The step is idempotent for fixed inputs (it rewrites the same cache slot with the same
    # values before reading it), so every variant can be compared with one eager result.
    reference = decode_step(model, tokens, input_pos).clone()
    put_figures(entry, "eager_ms", gpu_ms_per_call(lambda: decode_step(model, tokens, input_pos), args))

    graph, graph_out, capture_s = capture(model, tokens, input_pos)
    entry["capture_ms"] = capture_s * 1e3
    put_figures(entry, "cuda_graph_ms", gpu_ms_per_call(graph.replay, args))
    entry["cuda_graph_tokens_match"] = bool(torch.equal(graph_out, reference))
    del graph, graph_out
    free_memory()

    modes = (["reduce-overhead"] if args.compile else []) + (["max-autotune"] if args.max_autotune else [])
    for mode in modes:
        key = "compile" if mode == "reduce-overhead" else "max_autotune"
        r = bench_compiled(model, tokens, input_pos, reference, mode, args)
        if "error" in r:
            entry[f"{key}_error"] = r["error"]
            continue
        entry[f"{key}_ms"], entry[f"{key}_ms_runs"] = r["ms"], r["ms_runs"]
        entry[f"{key}_warmup_s"], entry[f"{key}_warmup_calls_s"] = r["warmup_s"], r["warmup_calls_s"]
        entry[f"{key}_tokens_match"] = r["tokens_match"]
        entry[f"{key}_tokens_mismatched"] = r["tokens_mismatched"]
        entry[f"{key}_cudagraph_skips"] = r["cudagraph_skips"]

    matches = [v for k, v in entry.items() if k.endswith("_tokens_match")]
    entry["tokens_match"] = all(matches)

    # Beyond the weights, attention reads each sequence's keys and values at positions
    # 0..context (what a paged kernel reads; SDPA over the masked cache may read more).
    entry["kv_bytes"] = (len(model.layers) * 2 * batch * model.kv_heads * (args.context + 1)
                         * model.head_dim * 2)
    entry["floor_with_kv_ms"] = (report["bytes_per_step"] + entry["kv_bytes"]) / (report["copy_tb_s"] * 1e12) * 1e3

    model.detach_caches()
    del ks, vs, tokens, input_pos, reference
    free_memory()
    return entry


def bench_prefill(model, args):
    """--prefill-seqs sequences x --prefill-chunk tokens at positions context..context+chunk-1
    through the same step, eager and as a CUDA graph: ms per chunk."""
    seqs, chunk = args.prefill_seqs, args.prefill_chunk
    gen = torch.Generator(device=DEVICE).manual_seed(args.seed + 7)
    ks, vs = make_caches(model, seqs, gen)
    model.attach_caches(ks, vs)
    tokens = random_tokens(model, seqs, chunk, args.seed + 8)
    input_pos = torch.arange(args.context, args.context + chunk, dtype=torch.int64, device=DEVICE)
    entry = {"sequences": seqs, "chunk": chunk, "positions": [args.context, args.context + chunk - 1]}

    reference = decode_step(model, tokens, input_pos).clone()
    put_figures(entry, "eager_ms", gpu_ms_per_call(lambda: decode_step(model, tokens, input_pos), args))
    graph, graph_out, capture_s = capture(model, tokens, input_pos)
    entry["capture_ms"] = capture_s * 1e3
    put_figures(entry, "cuda_graph_ms", gpu_ms_per_call(graph.replay, args))
    entry["tokens_match"] = bool(torch.equal(graph_out, reference))

    model.detach_caches()
    del graph, graph_out, ks, vs
    free_memory()
    return entry


def bench_bucket_pool(model, args):
    """One CUDA graph per bucket, all in one graph_pool_handle(); caches of the largest bucket
    allocated once, smaller buckets on slices of them. Captured largest first (as vLLM does),
    so that the smaller graphs reuse the pool's blocks instead of growing it."""
    buckets = sorted(args.pool_buckets, reverse=True)
    largest = buckets[0]
    gen = torch.Generator(device=DEVICE).manual_seed(args.seed + 9)
    ks, vs = make_caches(model, largest, gen)
    tokens = {b: random_tokens(model, b, 1, args.seed + 10 + b) for b in buckets}
    input_pos = torch.tensor([args.context], dtype=torch.int64, device=DEVICE)
    free_memory()
    reserved0, allocated0 = torch.cuda.memory_reserved(), torch.cuda.memory_allocated()

    pool = torch.cuda.graph_pool_handle()
    graphs, capture_s = {}, {}
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for b in buckets:
        model.attach_caches([k[:b] for k in ks], [v[:b] for v in vs])  # views: no new memory
        graph, out, seconds = capture(model, tokens[b], input_pos, pool=pool)
        graphs[b] = (graph, out)
        capture_s[b] = seconds
    total_s = time.perf_counter() - t0
    model.detach_caches()

    # The warm-ups' temporaries went back to the ordinary allocator; empty_cache releases them,
    # while the pool's blocks stay reserved as long as the graphs live.
    free_memory()
    entry = {
        "buckets": buckets,
        "capture_all_ms": total_s * 1e3,
        "capture_ms": {str(b): capture_s[b] * 1e3 for b in buckets},
        "pool_reserved_mib": (torch.cuda.memory_reserved() - reserved0) / 2**20,
        "pool_allocated_mib": (torch.cuda.memory_allocated() - allocated0) / 2**20,
        "replay_ms": {},
    }
    # Replays one bucket at a time (never two graphs of the pool at once), each read right
    # after its own replays: the pool's blocks are shared between the graphs.
    for b in sorted(buckets):
        graph, _ = graphs[b]
        entry["replay_ms"][str(b)] = statistics.median(gpu_ms_per_call(graph.replay, args))
    del graphs, pool, ks, vs
    free_memory()
    return entry


# --------------------------------------------------------------------------------------------
# Output.
# --------------------------------------------------------------------------------------------

def fmt(value, digits=3):
    return "-" if value is None else f"{value:.{digits}f}"


def print_table(report):
    print()
    print(f"{report['device']}, torch {report['torch']}, {report['model']}: context {report['context']}, "
          f"cache {report['cache_len']}, copy {report['copy_tb_s']:.3f} TB/s, "
          f"{report['bytes_per_step'] / 1e9:.3f} GB of weights per step, floor {report['floor_ms']:.3f} ms")
    columns = ["batch", "eager ms", "graph ms", "capture ms", "compile ms", "warm-up s", "autotune ms",
               "floor+kv ms", "match"]
    widths = [6, 10, 10, 11, 11, 10, 12, 12, 6]
    print("".join(c.rjust(w) for c, w in zip(columns, widths)))
    for batch, e in report["batches"].items():
        compile_ms = "error" if "compile_error" in e else fmt(e.get("compile_ms"))
        autotune_ms = "error" if "max_autotune_error" in e else fmt(e.get("max_autotune_ms"))
        row = [batch, fmt(e["eager_ms"]), fmt(e["cuda_graph_ms"]), fmt(e["capture_ms"], 1), compile_ms,
               fmt(e.get("compile_warmup_s"), 1), autotune_ms, fmt(e["floor_with_kv_ms"]),
               "yes" if e["tokens_match"] else "NO"]
        print("".join(str(c).rjust(w) for c, w in zip(row, widths)))
    p = report.get("prefill")
    if p:
        print(f"prefill {p['sequences']} x {p['chunk']} tokens: eager {p['eager_ms']:.3f} ms, "
              f"CUDA graph {p['cuda_graph_ms']:.3f} ms per chunk (capture {p['capture_ms']:.1f} ms), "
              f"tokens match: {'yes' if p['tokens_match'] else 'NO'}")
    bp = report.get("bucket_pool")
    if bp:
        print(f"bucket pool {bp['buckets']}: all captures {bp['capture_all_ms']:.1f} ms, pool reserved "
              f"{bp['pool_reserved_mib']:.1f} MiB, allocated {bp['pool_allocated_mib']:.1f} MiB")
        print("  replay ms: " + ", ".join(f"{b}: {ms:.3f}" for b, ms in bp["replay_ms"].items()))
    for batch, e in report["batches"].items():
        for key in ("compile_error", "max_autotune_error"):
            if key in e:
                print(f"batch {batch} {key}: {e[key].splitlines()[0]}")
        for key in ("compile", "max_autotune"):
            if e.get(f"{key}_cudagraph_skips"):
                print(f"batch {batch} {key}: inductor skipped CUDA graphs {e[f'{key}_cudagraph_skips']} times "
                      "(see its log lines): this figure is without them")


def write_json(report, path):
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")


# --------------------------------------------------------------------------------------------

def int_list(text):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers separated by commas")
    return values


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, metavar="DIR", help="folder with config.json and model.safetensors")
    p.add_argument("--batches", type=int_list, default=[1, 8, 32, 64], help="decode batch sizes")
    p.add_argument("--context", type=int, default=512, help="position of every sequence's new token")
    p.add_argument("--cache-len", type=int, default=2048, help="positions in each static cache")
    p.add_argument("--repeat", type=int, default=200, help="steps timed per figure")
    p.add_argument("--runs", type=int, default=1, help="timings per figure (the median is reported)")
    p.add_argument("--warmup", type=int, default=10, help="untimed calls before each timing")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True,
                   help="time torch.compile(mode='reduce-overhead', fullgraph=True)")
    p.add_argument("--max-autotune", action="store_true", help="also time torch.compile(mode='max-autotune') (its GEMM autotuning takes minutes per batch)")
    p.add_argument("--prefill-seqs", type=int, default=8, help="sequences of the prefill chunk (0: skip)")
    p.add_argument("--prefill-chunk", type=int, default=64, help="tokens per sequence of the prefill chunk")
    p.add_argument("--bucket-pool", action="store_true",
                   help="capture one graph per bucket of --pool-buckets into one shared pool")
    p.add_argument("--pool-buckets", type=int_list, default=POOL_BUCKETS, help="buckets of --bucket-pool")
    p.add_argument("--seed", type=int, default=0, help="seed of the tokens and cache contents")
    p.add_argument("--json", metavar="FILE", help="write every figure to FILE")
    args = p.parse_args()
    if args.repeat < 1 or args.runs < 1 or args.warmup < 0:
        p.error("need --repeat >= 1, --runs >= 1, --warmup >= 0")
    if not 0 <= args.context < args.cache_len:
        p.error("--context must lie in [0, --cache-len)")
    if args.prefill_seqs and (args.prefill_chunk < 1 or args.context + args.prefill_chunk > args.cache_len):
        p.error("the prefill chunk's positions --context .. --context + --prefill-chunk - 1 must fit the cache")
    return args


@torch.no_grad()
def main():
    args = parse_args()
    if not torch.cuda.is_available():
        sys.exit("llm_decode_torch: torch.cuda.is_available() is False: no CUDA device")
    # One recompile per batch and mode is expected; never fall back to eager for hitting the limit.
    for name in ("recompile_limit", "cache_size_limit"):  # the newer name first
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)
            break

    config, model = load_model(args.model, args.cache_len)
    report = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "model": args.model,
        "config": config,
        "context": args.context,
        "cache_len": args.cache_len,
        "repeat": args.repeat,
        "runs": args.runs,
        "warmup": args.warmup,
    }
    print(f"llm_decode_torch: {args.model}: {len(model.layers)} layers, hidden {model.hidden}, heads "
          f"{model.heads}/{model.kv_heads} x {model.head_dim}, vocab {model.embed.shape[0]}, "
          f"{'tied' if model.tied else 'untied'} LM head, on {report['device']}", flush=True)

    copy_figures = copy_bandwidth(args)
    report["copy_tb_s"] = statistics.median(copy_figures)
    report["copy_tb_s_runs"] = copy_figures
    report["bytes_per_step"] = model.weight_bytes_per_step()
    report["floor_ms"] = report["bytes_per_step"] / (report["copy_tb_s"] * 1e12) * 1e3
    print(f"llm_decode_torch: copy {report['copy_tb_s']:.3f} TB/s, {report['bytes_per_step']:,} bytes "
          f"per step, floor {report['floor_ms']:.3f} ms", flush=True)

    report["batches"] = {}
    for batch in args.batches:
        e = bench_batch(model, batch, args, report)
        report["batches"][str(batch)] = e
        print(f"llm_decode_torch: batch {batch}: eager {e['eager_ms']:.3f} ms, graph {e['cuda_graph_ms']:.3f} ms "
              f"(capture {e['capture_ms']:.1f} ms), compile {fmt(e.get('compile_ms'))} ms "
              f"(warm-up {fmt(e.get('compile_warmup_s'), 1)} s), match {e['tokens_match']}", flush=True)
        write_json(report, args.json)  # what is measured so far survives a later failure or timeout

    if args.prefill_seqs:
        report["prefill"] = bench_prefill(model, args)
        write_json(report, args.json)
    if args.bucket_pool:
        report["bucket_pool"] = bench_bucket_pool(model, args)
        write_json(report, args.json)

    print_table(report)
    if args.json:
        print(f"wrote {args.json}", flush=True)


if __name__ == "__main__":
    main()
