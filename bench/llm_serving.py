#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The serving workload of samples/llm_serving from Python, on flowdsl or on PyTorch, in the same
loop: requests with uniform random prompt and output lengths arrive at Poisson times; a
continuous batcher admits them into slots (the lowest free one), and each step decodes one token
of every sequence whose prompt is in the cache and prefills prompt chunks, oldest admission first,
within the step's token budget. The model is bench/llm_decode_torch.py's, on the same weights.

--engine torch: as PyTorch users serve it: the decode step as one CUDA graph a batch bucket 1, 2,
4, ... --slots, captured up front into one shared memory pool, prompt chunks run eagerly. Caches
are [slots, kv_heads, cache_len, head_dim] a layer; bucket b's graph decodes slots 0 .. b-1 (views
of the caches), rows of slots that are not decoding at the scratch position cache_len - 1, which no
sequence reaches.

--engine flowdsl: a flowdsl.Family over token buckets 1, 2, 4, ... --max-step-tokens made ready up
front, built from Python with the registered kernels on torch tensors (the weights PyTorch loaded),
launched on torch's stream: one launch a step runs every decode token and prompt chunk together
(the step of samples/llm_serving), the KV cache paged with a fixed run of pages a slot.

Reports at each rate: time to first token and time per output token (p50, p99), output tokens/s,
GPU busy, and how long the engine took to get ready and the memory it holds beyond the weights.

  python3 bench/llm_serving.py --model /tmp/llama1b --engine flowdsl --rates 8,16,32,64 --json flowdsl_py.json
  python3 bench/llm_serving.py --model /tmp/llama1b --engine torch --rates 8,16,32,64 --json torch_serving.json
  python3 bench/llm_serving.py --model /tmp/tiny_ckpt --engine torch --device cpu --requests 20 --rates 50  # a check
"""

import argparse
import collections
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llm_decode_torch as ldt  # noqa: E402  (the model, its step and its loader)

torch = ldt.torch


# --------------------------------------------------------------------------------------------
# The batcher: requests wait in arrival order and take the lowest free slot; each step decodes
# one token of every sequence whose prompt is in the cache, then prefills prompt chunks, oldest
# admission first, within the step's token budget.
# --------------------------------------------------------------------------------------------

class Sequence:
    def __init__(self, rid, prompt, max_new, admitted):
        self.id, self.prompt, self.max_new, self.admitted = rid, prompt, max_new, admitted
        self.prefilled = 0
        self.generated = []

    def decoding(self):
        return self.prefilled == len(self.prompt)


class Batcher:
    def __init__(self, slots, max_step_tokens, prefill_chunk, end_token=-1):
        if min(slots, max_step_tokens, prefill_chunk) <= 0 or max_step_tokens < slots:
            raise ValueError("limits must be positive, with a decode token a slot in a step")
        self.slots = [None] * slots
        self.max_step_tokens, self.prefill_chunk, self.end_token = max_step_tokens, prefill_chunk, end_token
        self.waiting = collections.deque()
        self.admissions = 0

    def submit(self, rid, prompt, max_new):
        if not prompt or max_new < 1:
            raise ValueError(f"request {rid} needs a prompt and at least one new token")
        self.waiting.append((rid, prompt, max_new))

    def running(self):
        return sum(s is not None for s in self.slots)

    def plan(self):
        """(decode: [(slot, token, position)], prefill: [(slot, tokens, first position)])."""
        for i, s in enumerate(self.slots):
            if s is None and self.waiting:
                rid, prompt, max_new = self.waiting.popleft()
                self.slots[i] = Sequence(rid, prompt, max_new, self.admissions)
                self.admissions += 1
        decode = [(i, s.generated[-1], len(s.prompt) + len(s.generated) - 1)
                  for i, s in enumerate(self.slots) if s is not None and s.decoding()]
        budget = self.max_step_tokens - len(decode)
        prefill = []
        for i, s in sorted(((i, s) for i, s in enumerate(self.slots) if s is not None and not s.decoding()),
                           key=lambda p: p[1].admitted):
            count = min(budget, len(s.prompt) - s.prefilled, self.prefill_chunk)
            if count <= 0:
                break
            prefill.append((i, s.prompt[s.prefilled:s.prefilled + count], s.prefilled))
            budget -= count
        return decode, prefill

    def complete(self, decode, prefill, decode_next, prefill_next):
        """Records each sampled token (decode_next by decode entry; prefill_next by prefill entry,
        used where the chunk ends its prompt); returns the ids of the requests that ended, with
        the slots of theirs freed."""
        sampled = [(slot, t) for (slot, _, _), t in zip(decode, decode_next)]
        for (slot, tokens, _), t in zip(prefill, prefill_next):
            s = self.slots[slot]
            s.prefilled += len(tokens)
            if s.decoding():
                sampled.append((slot, t))
        finished = []
        for slot, t in sampled:
            s = self.slots[slot]
            s.generated.append(int(t))
            if int(t) == self.end_token or len(s.generated) >= s.max_new:
                finished.append((s.id, s.generated))
                self.slots[slot] = None
        return finished


# --------------------------------------------------------------------------------------------
# The model's steps.
# --------------------------------------------------------------------------------------------

def buckets_up_to(largest):
    """1, 2, 4, ... up to largest, and largest itself (flowdsl.Family.powers_of_two's rule)."""
    out = [1 << i for i in range(largest.bit_length()) if (1 << i) <= largest]
    return out if out[-1] == largest else out + [largest]


class TorchServer:
    """PyTorch's way: a CUDA graph of the decode step a bucket of slots, prompt chunks eagerly."""

    def __init__(self, model, config, args):
        self.model, self.slots, self.use_graphs = model, args.slots, ldt.DEVICE == "cuda"
        self.buckets = buckets_up_to(args.slots)
        gen = torch.Generator(device=ldt.DEVICE).manual_seed(0)
        self.k, self.v = ldt.make_caches(model, args.slots, gen)
        self.inputs = {b: (torch.zeros(b, 1, dtype=torch.int64, device=ldt.DEVICE),
                           torch.full((b, 1), model.cache_len - 1, dtype=torch.int64, device=ldt.DEVICE))
                       for b in self.buckets}
        self.graphs, self.ready_ms, self.memory_mib = {}, 0.0, 0.0
        if self.use_graphs:
            self.capture()

    def attach(self, rows):
        self.model.attach_caches([k[rows] for k in self.k], [v[rows] for v in self.v])  # views

    def capture(self):
        """Every bucket's decode step as a CUDA graph in one pool, largest first (as vLLM does)."""
        ldt.free_memory()
        reserved0 = torch.cuda.memory_reserved()
        pool = torch.cuda.graph_pool_handle()
        t0 = time.perf_counter()
        for b in sorted(self.buckets, reverse=True):
            self.attach(slice(0, b))
            tokens, positions = self.inputs[b]
            graph, out, _ = ldt.capture(self.model, tokens, positions, pool=pool)
            self.graphs[b] = (graph, out)
        self.ready_ms = (time.perf_counter() - t0) * 1e3
        ldt.free_memory()
        self.memory_mib = (torch.cuda.memory_reserved() - reserved0) / 2**20

    def step(self, decode, prefill):
        """Enqueues one step: (the decode entries' next tokens, each chunk's last position's token,
        both device tensors, and the bucket that decoded)."""
        decode_next, bucket = None, 0
        if decode:
            bucket = next(b for b in self.buckets if b > max(slot for slot, _, _ in decode))
            tokens, positions = self.inputs[bucket]
            tokens.zero_()
            positions.fill_(self.model.cache_len - 1)
            rows = torch.tensor([e[0] for e in decode], dtype=torch.int64, device=ldt.DEVICE)
            tokens[rows, 0] = torch.tensor([e[1] for e in decode], dtype=torch.int64, device=ldt.DEVICE)
            positions[rows, 0] = torch.tensor([e[2] for e in decode], dtype=torch.int64, device=ldt.DEVICE)
            if self.use_graphs:
                graph, out = self.graphs[bucket]
                graph.replay()
            else:
                self.attach(slice(0, bucket))
                out = ldt.decode_step(self.model, tokens, positions)
            decode_next = out[rows]
        chunks = []
        for slot, tokens, first in prefill:
            self.attach(slice(slot, slot + 1))
            t = torch.tensor([tokens], dtype=torch.int64, device=ldt.DEVICE)
            positions = torch.arange(first, first + len(tokens), dtype=torch.int64, device=ldt.DEVICE)
            chunks.append(ldt.decode_step(self.model, t, positions))
        return decode_next, (torch.cat(chunks) if chunks else None), bucket


class FlowdslServer:
    """flowdsl's way: a Family of step graphs over token buckets, decode tokens and prompt chunks
    in one launch, on torch tensors, the KV cache paged (slot s holds pages s * pps .. + pps)."""

    PAGE = 16

    def __init__(self, model, config, args):
        activations = self.allocate(model, config, args)
        flowdsl = self.flowdsl
        self.buckets = flowdsl.Family.powers_of_two(args.max_step_tokens)
        self.runtime = flowdsl.Runtime(capacity=max(32, 2 * len(self.buckets)))
        self.family = flowdsl.Family(self.runtime, self.buckets, self.build)
        t0 = time.perf_counter()
        self.family.prepare(stream=torch.cuda.current_stream())
        torch.cuda.synchronize()
        self.ready_ms = (time.perf_counter() - t0) * 1e3
        self.memory_mib = activations + self.family.stats["device_memory"] / 2**20

    def allocate(self, model, config, args):
        """The caches, the activations a step of up to --max-step-tokens tokens works on, and the
        block table; returns the MiB of the activations."""
        import flowdsl  # the module built with -DFLOWDSL_PYTHON=ON (PYTHONPATH=build/python)

        self.flowdsl, self.model, self.slots = flowdsl, model, args.slots
        m, dev, bf16, i32 = model, ldt.DEVICE, torch.bfloat16, torch.int32
        self.H, self.D, self.heads, self.kv_heads = m.hidden, m.head_dim, m.heads, m.kv_heads
        self.vocab = m.embed.shape[0]
        self.inter = m.layers[0].wd.shape[1]
        self.qkv_out = (self.heads + 2 * self.kv_heads) * self.D
        self.max_context = m.cache_len
        self.pps = -(-m.cache_len // self.PAGE)
        self.pages = args.slots * self.pps
        T, S = args.max_step_tokens, args.slots
        self.max_tokens = T
        before = torch.cuda.memory_allocated() if dev == "cuda" else 0
        self.block_table = torch.arange(self.pages, dtype=i32, device=dev).view(S, self.pps)
        pool = self.pages * self.kv_heads * self.PAGE * self.D
        self.k = [torch.zeros(pool, dtype=bf16, device=dev) for _ in m.layers]
        self.v = [torch.zeros(pool, dtype=bf16, device=dev) for _ in m.layers]
        self.cache_mib = 2 * len(m.layers) * pool * 2 / 2**20
        self.inv_freq = ldt.rope_inverse_frequencies(config, self.D).to(dev)
        self.tokens, self.positions, self.seqs = (torch.zeros(T, dtype=i32, device=dev) for _ in range(3))
        self.last_index, self.next = torch.zeros(S, dtype=i32, device=dev), torch.zeros(S, dtype=i32, device=dev)
        self.x, self.h, self.o, self.mlp = (torch.zeros(T, self.H, dtype=bf16, device=dev) for _ in range(4))
        self.qkv = torch.zeros(T, self.qkv_out, dtype=bf16, device=dev)
        self.q, self.attn = (torch.zeros(T, self.heads * self.D, dtype=bf16, device=dev) for _ in range(2))
        self.gate_up = torch.zeros(T, 2 * self.inter, dtype=bf16, device=dev)
        self.act = torch.zeros(T, self.inter, dtype=bf16, device=dev)
        self.hlast = torch.zeros(S, self.H, dtype=bf16, device=dev)
        self.logits = torch.zeros(S, self.vocab, dtype=bf16, device=dev)
        floats = max(t * self.heads * self.splits(t)[0] * (self.D + 2) for t in range(1, T + 1))
        self.workspace = torch.zeros(floats, dtype=torch.float32, device=dev)
        allocated = (torch.cuda.memory_allocated() - before) / 2**20 if dev == "cuda" else 0.0
        return allocated - self.cache_mib

    def splits(self, tokens):
        return self.flowdsl.attention_splits(tokens, self.heads, self.kv_heads, self.D, self.PAGE, self.pps,
                                             self.slots, self.pages, self.max_context)

    def build(self, T):
        """The step of T tokens: declare_step of samples/llm_model.cuh, its prefill form (the LM head
        on the rows gathered at last_index, their next tokens into next): the small-batch kernel
        with the norms inside for one token, cuBLASLt with the norms as kernels above."""
        m, g = self.model, self.flowdsl.Graph()
        rows, eps, fused = min(T, self.slots), m.eps, T == 1
        last = [None]

        def chain(node):
            if last[0] is not None:
                node.after(last[0])
            last[0] = node
            return node

        def cublaslt(name, mr, n, k, x, w, y):
            chain(g.library(name, "cublaslt.linear.bf16", m=mr, n=n, k=k, x=x, w=w, bias=0, epilogue="none", y=y))

        H, D = self.H, self.D
        kv = dict(q_heads=self.heads, kv_heads=self.kv_heads, head_dim=D, page_size=self.PAGE,
                  pages_per_seq=self.pps, sequences=self.slots, pages=self.pages)
        splits, split_len = self.splits(T)
        chain(g.kernel("embed", "gather_rows.bf16", count=T, cols=H, index=self.tokens, src_rows=self.vocab,
                       **{"in": m.embed}, out=self.x))
        if not fused:
            chain(g.kernel("norm.0", "rms_norm.bf16", rows=T, cols=H, eps=eps, x=self.x, w=m.layers[0].attn_norm,
                           y=self.h))
        for i, L in enumerate(m.layers):
            p = f"layer{i}."
            if fused:
                chain(g.kernel(p + "qkv", "linear_norm.bf16", m=T, n=self.qkv_out, k=H, eps=eps, x=self.x,
                               g=L.attn_norm, w=L.wqkv, y=self.qkv))
            else:
                cublaslt(p + "qkv", T, self.qkv_out, H, self.h, L.wqkv, self.qkv)
            chain(g.kernel(p + "rope", "rope_kv_append.bf16", tokens=T, **kv, qkv=self.qkv, positions=self.positions,
                           seq_of_token=self.seqs, block_table=self.block_table, inv_freq=self.inv_freq, q=self.q,
                           k_cache=self.k[i], v_cache=self.v[i]))
            chain(g.kernel(p + "attention.partial", "decode_attention_partial.bf16", tokens=T, **kv, splits=splits,
                           split_len=split_len, scale=1.0 / D ** 0.5, q=self.q, positions=self.positions,
                           seq_of_token=self.seqs, block_table=self.block_table, k_cache=self.k[i],
                           v_cache=self.v[i], partial=self.workspace))
            chain(g.kernel(p + "attention", "decode_attention_combine.bf16", tokens=T, q_heads=self.heads,
                           head_dim=D, splits=splits, partial=self.workspace, out=self.attn))
            if fused:
                chain(g.kernel(p + "o", "linear_residual.bf16", m=T, n=H, k=self.heads * D, x=self.attn, w=L.wo,
                               y=self.x))
                chain(g.kernel(p + "gate_up", "linear_norm.bf16", m=T, n=2 * self.inter, k=H, eps=eps, x=self.x,
                               g=L.mlp_norm, w=L.wgu, y=self.gate_up))
                chain(g.kernel(p + "down", "linear_gated_residual.bf16", m=T, n=H, k=self.inter, gate_up=self.gate_up,
                               w=L.wd, y=self.x))
                continue
            cublaslt(p + "o", T, H, self.heads * D, self.attn, L.wo, self.o)
            chain(g.kernel(p + "post_norm", "add_rms_norm.bf16", rows=T, cols=H, eps=eps, residual=self.x, x=self.o,
                           w=L.mlp_norm, y=self.h))
            half = T * self.inter  # gate, then up, as two [T, inter] halves (as the C++ step lays them)
            flat = self.gate_up.view(-1)
            cublaslt(p + "gate", T, self.inter, H, self.h, L.wgu[:self.inter], flat[:half])
            cublaslt(p + "up", T, self.inter, H, self.h, L.wgu[self.inter:], flat[half:2 * half])
            chain(g.kernel(p + "act", "silu_mul.bf16", n=half, gate=flat[:half], up=flat[half:2 * half],
                           out=self.act.view(-1)[:half]))
            cublaslt(p + "down", T, H, self.inter, self.act, L.wd, self.mlp)
            after = m.layers[i + 1].attn_norm if i + 1 < len(m.layers) else m.norm
            chain(g.kernel(p + "next_norm", "add_rms_norm.bf16", rows=T, cols=H, eps=eps, residual=self.x,
                           x=self.mlp, w=after, y=self.h))
        head_in = self.x if fused else self.h
        chain(g.kernel("last_rows", "gather_rows.bf16", count=rows, cols=H, index=self.last_index, src_rows=T,
                       **{"in": head_in}, out=self.hlast))
        lm_head = m.embed if m.tied else m.lm_head
        if fused:
            chain(g.kernel("lm_head", "linear_norm.bf16", m=rows, n=self.vocab, k=H, eps=eps, x=self.hlast, g=m.norm,
                           w=lm_head, y=self.logits))
        else:
            cublaslt("lm_head", rows, self.vocab, H, self.hlast, lm_head, self.logits)
        chain(g.kernel("argmax", "row_argmax.bf16", rows=rows, cols=self.vocab, x=self.logits, out=self.next))
        g.programmatic_edges(True)
        return g

    def step(self, decode, prefill):
        """Enqueues one launch of every decode token and prompt chunk: (the decode entries' next
        tokens, each chunk's last position's token, as device tensors, and the bucket)."""
        tokens, positions, seqs, sample = [], [], [], []
        for slot, token, position in decode:
            sample.append(len(tokens))
            tokens.append(token)
            positions.append(position)
            seqs.append(slot)
        for slot, chunk, first in prefill:
            tokens += chunk
            positions += range(first, first + len(chunk))
            seqs += [slot] * len(chunk)
            sample.append(len(tokens) - 1)
        T = len(tokens)
        bucket = self.family.bucket_for(T)
        pad = bucket - T  # padding tokens belong to no sequence: they write no cache
        stream = torch.cuda.current_stream()
        host = torch.tensor([tokens + [0] * pad, positions + [0] * pad, seqs + [-1] * pad], dtype=torch.int32)
        self.tokens[:bucket].copy_(host[0], non_blocking=True)
        self.positions[:bucket].copy_(host[1], non_blocking=True)
        self.seqs[:bucket].copy_(host[2], non_blocking=True)
        rows = min(bucket, self.slots)
        self.last_index[:rows].copy_(torch.tensor(sample + [0] * (rows - len(sample)), dtype=torch.int32),
                                     non_blocking=True)
        self.family.launch(T, stream=stream)
        nd = len(decode)
        return self.next[:nd], (self.next[nd:len(sample)] if prefill else None), bucket


def percentile(values, p):
    if not values:
        return 0.0
    v = sorted(values)
    return v[min(len(v) - 1, int(p / 100 * (len(v) - 1) + 0.5))]


def serve(server, args, vocab, rate):
    rng = random.Random(args.seed + int(rate * 1000))
    requests, at = [], 0.0
    for i in range(args.requests):
        at += rng.expovariate(rate / 1000.0)  # milliseconds
        prompt = [rng.randrange(vocab) for _ in range(rng.randint(args.prompt_min, args.prompt_max))]
        requests.append((at, i, prompt, rng.randint(args.output_min, args.output_max)))
    batcher = Batcher(args.slots, args.max_step_tokens, args.prefill_chunk, args.end_token)
    token_ms = collections.defaultdict(list)
    cuda = ldt.DEVICE == "cuda"
    start, stop = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if cuda else (None, None)
    gpu_ms, steps, finished, next_request, out_tokens = 0.0, 0, 0, 0, 0
    buckets = collections.Counter()
    t0 = time.perf_counter()
    while finished < len(requests):
        now = (time.perf_counter() - t0) * 1e3
        while next_request < len(requests) and requests[next_request][0] <= now:
            _, rid, prompt, max_new = requests[next_request]
            batcher.submit(rid, prompt, max_new)
            next_request += 1
        decode, prefill = batcher.plan()
        if not decode and not prefill:
            time.sleep(max(0.0, requests[next_request][0] - now) / 1e3)
            continue
        if cuda:
            start.record()
        decode_out, prefill_out, bucket = server.step(decode, prefill)
        if cuda:
            stop.record()
        # One synchronisation: the tokens come back to the host (.tolist()).
        decode_next = decode_out.tolist() if decode else []
        prefill_next = prefill_out.tolist() if prefill else []
        if bucket:
            buckets[bucket] += 1
        if cuda:
            gpu_ms += start.elapsed_time(stop)
        steps += 1
        done = (time.perf_counter() - t0) * 1e3
        for slot, _, _ in decode:
            token_ms[batcher.slots[slot].id].append(done)
        for slot, tokens, first in prefill:
            s = batcher.slots[slot]
            if first + len(tokens) == len(s.prompt):
                token_ms[s.id].append(done)
        out_tokens += len(decode) + sum(first + len(tokens) == len(batcher.slots[slot].prompt)
                                        for slot, tokens, first in prefill)
        finished += len(batcher.complete(decode, prefill, decode_next, prefill_next))
    wall_ms = (time.perf_counter() - t0) * 1e3
    if args.end_token < 0:  # every request ran to its limit: each of its tokens timed once
        wrong = [rid for _, rid, _, max_new in requests if len(token_ms[rid]) != max_new]
        if wrong:
            sys.exit(f"llm_serving: requests {wrong[:5]} got another number of tokens than they asked for")
    ttft = [token_ms[rid][0] - at for at, rid, _, _ in requests]
    tpot = [(t[-1] - t[0]) / (len(t) - 1) for t in token_ms.values() if len(t) > 1]
    row = {"rate": rate, "requests": len(requests), "steps": steps, "wall_ms": wall_ms,
           "gpu_busy": gpu_ms / wall_ms, "output_tokens": out_tokens,
           "tokens_per_s": out_tokens / wall_ms * 1e3,
           "ttft_ms": {"p50": percentile(ttft, 50), "p99": percentile(ttft, 99)},
           "tpot_ms": {"p50": percentile(tpot, 50), "p99": percentile(tpot, 99)},
           "bucket_steps": {str(b): n for b, n in sorted(buckets.items())}}
    print(f"rate {rate:6.1f}/s: {len(requests)} requests in {wall_ms:.0f} ms, {steps} steps; "
          f"TTFT p50 {row['ttft_ms']['p50']:.1f} p99 {row['ttft_ms']['p99']:.1f} ms; "
          f"TPOT p50 {row['tpot_ms']['p50']:.2f} p99 {row['tpot_ms']['p99']:.2f} ms; "
          f"{row['tokens_per_s']:.0f} tokens/s; GPU busy {100 * row['gpu_busy']:.0f}%", flush=True)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="checkpoint folder (config.json, model.safetensors)")
    p.add_argument("--engine", default="torch", choices=["torch", "flowdsl"])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: torch without CUDA graphs (a check)")
    p.add_argument("--slots", type=int, default=64)
    p.add_argument("--max-step-tokens", type=int, default=256)
    p.add_argument("--prefill-chunk", type=int, default=64)
    p.add_argument("--max-context", type=int, default=1024)
    p.add_argument("--requests", type=int, default=100)
    p.add_argument("--prompt-min", type=int, default=16)
    p.add_argument("--prompt-max", type=int, default=256)
    p.add_argument("--output-min", type=int, default=16)
    p.add_argument("--output-max", type=int, default=128)
    p.add_argument("--rates", default="2,8,32", help="arrival rates, requests a second")
    p.add_argument("--end-token", type=int, default=-1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", help="figures as JSON")
    args = p.parse_args()
    if not (1 <= args.prompt_min <= args.prompt_max and 1 <= args.output_min <= args.output_max):
        sys.exit("llm_serving: prompt and output lengths must be positive, each minimum at most its maximum")
    if args.prompt_max + args.output_max > args.max_context - 1:
        sys.exit("llm_serving: prompt and output lengths must fit --max-context - 1 (the scratch position)")
    if args.engine == "flowdsl" and args.device != "cuda":
        sys.exit("llm_serving: the flowdsl engine runs on CUDA")
    ldt.DEVICE = args.device
    if args.device == "cpu":
        torch.cuda.synchronize = lambda: None  # the loader's synchronisation, on a machine without CUDA
        ldt.free_memory = lambda: None
    config, model = ldt.load_model(args.model, args.max_context)
    server = (FlowdslServer if args.engine == "flowdsl" else TorchServer)(model, config, args)
    print(f"{args.engine}: {len(server.buckets)} buckets ({server.buckets[0]} .. {server.buckets[-1]}) ready in "
          f"{server.ready_ms:.0f} ms, {server.memory_mib:.1f} MiB beyond weights and caches", flush=True)
    report = {"engine": args.engine, "ready_ms": server.ready_ms, "memory_mib": server.memory_mib,
              "buckets": server.buckets, "rates": []}
    with torch.inference_mode():
        for rate in (float(r) for r in args.rates.split(",")):
            report["rates"].append(serve(server, args, config["vocab_size"], rate))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
