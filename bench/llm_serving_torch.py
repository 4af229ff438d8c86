#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's side of the serving comparison: the workload of samples/llm_serving (requests with
uniform random prompt and output lengths arriving at Poisson times, continuous batching, prompts
prefilled by chunks between decode steps) on the plain PyTorch model of bench/llm_decode_torch.py,
served the way PyTorch users serve it: one CUDA graph of the decode step per batch bucket
1, 2, 4, ... --slots, captured up front into one shared memory pool, prompt chunks run eagerly.

The caches are [slots, kv_heads, cache_len, head_dim] a layer, a sequence a slot (the lowest free
one). Bucket b's graph decodes slots 0 .. b-1, as views of the caches: a step launches the
smallest bucket holding every decoding slot; rows of slots that are not decoding get token 0 at
the scratch position cache_len - 1, which no sequence reaches (at most cache_len - 1 positions).

Reports at each rate what samples/llm_serving reports: time to first token and time per output
token (p50, p99), output tokens/s, GPU busy, the pool's memory and the capture time.

  python3 bench/llm_serving_torch.py --model /tmp/llama1b --rates 8,16,32,64 --requests 100 --json torch_serving.json
  python3 bench/llm_serving_torch.py --model /tmp/tiny_ckpt --device cpu --requests 20 --rates 50   # no graphs: a check
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

class Server:
    def __init__(self, model, slots, use_graphs):
        self.model, self.slots, self.use_graphs = model, slots, use_graphs
        self.buckets = [1 << i for i in range(slots.bit_length()) if (1 << i) <= slots]
        if self.buckets[-1] != slots:
            self.buckets.append(slots)
        gen = torch.Generator(device=ldt.DEVICE).manual_seed(0)
        self.k, self.v = ldt.make_caches(model, slots, gen)
        self.inputs = {b: (torch.zeros(b, 1, dtype=torch.int64, device=ldt.DEVICE),
                           torch.full((b, 1), model.cache_len - 1, dtype=torch.int64, device=ldt.DEVICE))
                       for b in self.buckets}
        self.graphs, self.capture_ms, self.pool_mib = {}, 0.0, 0.0
        if use_graphs:
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
        self.capture_ms = (time.perf_counter() - t0) * 1e3
        ldt.free_memory()
        self.pool_mib = (torch.cuda.memory_reserved() - reserved0) / 2**20

    def decode(self, entries):
        """One decode step of entries [(slot, token, position)]: the next token of each."""
        bucket = next(b for b in self.buckets if b > max(slot for slot, _, _ in entries))
        tokens, positions = self.inputs[bucket]
        tokens.zero_()
        positions.fill_(self.model.cache_len - 1)
        slots = torch.tensor([e[0] for e in entries], dtype=torch.int64)
        tokens[slots.to(ldt.DEVICE), 0] = torch.tensor([e[1] for e in entries], dtype=torch.int64, device=ldt.DEVICE)
        positions[slots.to(ldt.DEVICE), 0] = torch.tensor([e[2] for e in entries], dtype=torch.int64, device=ldt.DEVICE)
        if self.use_graphs:
            graph, out = self.graphs[bucket]
            graph.replay()
        else:
            self.attach(slice(0, bucket))
            out = ldt.decode_step(self.model, tokens, positions)
        return out[slots.to(ldt.DEVICE)], bucket

    def prefill(self, slot, tokens, first):
        """A chunk of one sequence's prompt, eagerly: the token its last position picks."""
        self.attach(slice(slot, slot + 1))
        t = torch.tensor([tokens], dtype=torch.int64, device=ldt.DEVICE)
        positions = torch.arange(first, first + len(tokens), dtype=torch.int64, device=ldt.DEVICE)
        return ldt.decode_step(self.model, t, positions)[0]


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
        decode_next, prefill_next = [], []
        if decode:
            out, bucket = server.decode(decode)
            buckets[bucket] += 1
        prefill_out = [server.prefill(slot, tokens, first) for slot, tokens, first in prefill]
        if cuda:
            stop.record()
        # One synchronisation: the tokens come back to the host (.tolist()).
        if decode:
            decode_next = out.tolist()
        prefill_next = [int(t) for t in prefill_out]
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
            sys.exit(f"llm_serving_torch: requests {wrong[:5]} got another number of tokens than they asked for")
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
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: no CUDA graphs (a check)")
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
        sys.exit("llm_serving_torch: prompt and output lengths must be positive, each minimum at most its maximum")
    if args.prompt_max + args.output_max > args.max_context - 1:
        sys.exit("llm_serving_torch: prompt and output lengths must fit --max-context - 1 (the scratch position)")
    ldt.DEVICE = args.device
    if args.device == "cpu":
        torch.cuda.synchronize = lambda: None  # the loader's synchronisation, on a machine without CUDA
        ldt.free_memory = lambda: None
    config, model = ldt.load_model(args.model, args.max_context)
    server = Server(model, args.slots, use_graphs=args.device == "cuda")
    print(f"{len(server.buckets)} decode buckets ({server.buckets[0]} .. {server.buckets[-1]}), "
          f"captured in {server.capture_ms:.0f} ms, pool {server.pool_mib:.1f} MiB", flush=True)
    report = {"capture_ms": server.capture_ms, "pool_mib": server.pool_mib, "buckets": server.buckets, "rates": []}
    with torch.inference_mode():
        for rate in (float(r) for r in args.rates.split(",")):
            report["rates"].append(serve(server, args, config["vocab_size"], rate))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
