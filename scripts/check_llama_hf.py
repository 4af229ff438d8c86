#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks flowdsl's Llama decode (samples/llm_decode) against Hugging Face transformers'
LlamaForCausalLM on the same safetensors checkpoint.

    python3 scripts/check_llama_hf.py --model /tmp/llama1b --dump $OUT/dump --json $OUT/hf_check.json

--model is a checkpoint folder (config.json, model.safetensors in bf16) as written by
scripts/make_llama_checkpoint.py or by save_pretrained. --dump is the folder the sample wrote:
generation.json ({"prompts", "generated", "logits_steps": N}) and logits.npy (float32
[N, batch, vocab]; step 0 holds the logits at the last prompt token, step i those after feeding
generated[b][i-1]).

Two checks, both run in bf16 on the GPU with HF's "sdpa" attention ("eager" where sdpa is missing):

1. Logits. HF runs each sequence once with teacher forcing, on prompt + the first N-1 tokens
   flowdsl generated, so that both sides see the same tokens however the greedy runs diverge.
   Per sequence and step: max and mean abs difference and the relative L2 error
   ||flowdsl - hf|| / ||hf|| over the vocabulary. Passes when the largest relative L2 error is
   <= --logits-rtol (0.02). That is a bf16 tolerance across the model's depth: both sides compute
   in bf16 with float accumulation, but in different orders (flowdsl one token at a time with its
   own kernels, HF over the whole sequence at once), so the activations each layer rounds to bf16
   (relative error up to 2^-9 each) differ, and the differences add up over the layers.
2. Greedy tokens. HF decodes greedily (argmax, KV cache, no EOS stop) as many tokens as flowdsl
   generated for each sequence. A sequence passes when every token matches; for one that fails,
   the first differing step and HF's top-2 logit gap there are reported (a near tie explains a
   divergence). Passes when the fraction of identical sequences is >= --min-identical (0.95);
   with --allow-near-ties a sequence whose first divergence is a near tie (HF's margin over
   flowdsl's token no more than the logits' max abs error at that step) counts as identical.

The report also gives HF against itself (its KV-cache decode against its single forward, same
tokens): how far two correct bf16 paths drift apart on this checkpoint, a scale for the error
above. On a random-weight checkpoint the top logits are nearly tied at most steps (often exactly,
HF's logits being bf16), so greedy runs of two correct implementations diverge easily.

At least --steps (32) tokens must have been generated and compared per sequence, else it fails.
Exit status: 0 both checks pass, 1 one fails, 2 unusable input (a missing file, a shape that does
not match the prompts or the vocabulary; the message names the file).

Needs PyTorch with CUDA, transformers, safetensors and NumPy; no network.
"""

import argparse
import json
import os
import sys

import numpy as np

EXIT_PASS, EXIT_FAIL, EXIT_UNUSABLE = 0, 1, 2


class UnusableInput(Exception):
    """Input this script cannot check (exit status 2); the message names the file."""


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="checkpoint folder: config.json and model.safetensors")
    parser.add_argument("--dump", required=True, help="folder with flowdsl's generation.json and logits.npy")
    parser.add_argument("--json", help="write the summary to this file")
    parser.add_argument("--logits-rtol", type=float, default=0.02,
                        help="largest relative L2 error of a step's logits (default 0.02)")
    parser.add_argument("--min-identical", type=float, default=0.95,
                        help="smallest fraction of sequences whose greedy tokens all match HF's (default 0.95)")
    parser.add_argument("--steps", type=int, default=32,
                        help="tokens each sequence must have generated, and logits steps compared (default 32)")
    parser.add_argument("--allow-near-ties", action="store_true",
                        help="count a sequence whose first divergence is a near tie (HF's margin over flowdsl's "
                             "token <= the logits' max abs error there) as matching")
    parser.add_argument("--hf-batch", type=int, default=1,
                        help="sequences HF runs at once (only those with equal lengths share a batch). HF's own "
                             "bf16 results change with the batch size, so the default, 1, is the reference")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.hf_batch < 1:
        parser.error("--steps and --hf-batch must be at least 1")
    return args


# ---------------------------------------------------------------------------------------------
# Input: read and checked before torch is imported, so that a bad dump fails in a second.


def read_json(path):
    if not os.path.isfile(path):
        raise UnusableInput(f"{path}: no such file")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise UnusableInput(f"{path}: cannot read it as JSON ({e})") from e


def read_model_config(model_dir):
    """config.json's fields that the checks need; also checks that the weights are there."""
    config = read_json(os.path.join(model_dir, "config.json"))
    weights = [os.path.join(model_dir, name) for name in ("model.safetensors", "model.safetensors.index.json")]
    if not any(os.path.isfile(path) for path in weights):
        raise UnusableInput(f"{weights[0]}: no such file (nor a sharded index)")
    vocab = config.get("vocab_size")
    if not isinstance(vocab, int) or vocab < 2:
        raise UnusableInput(f"{model_dir}/config.json: vocab_size is {vocab!r}, not an integer >= 2")
    return config


def is_token_list(value, vocab):
    return isinstance(value, list) and all(
        isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab for t in value)


def read_generation(dump_dir, vocab):
    """(prompts, generated, logits_steps) from generation.json, every token id checked."""
    path = os.path.join(dump_dir, "generation.json")
    data = read_json(path)
    if not isinstance(data, dict) or not all(k in data for k in ("prompts", "generated", "logits_steps")):
        raise UnusableInput(f"{path}: needs the keys prompts, generated and logits_steps")
    prompts, generated, steps = data["prompts"], data["generated"], data["logits_steps"]
    if not isinstance(prompts, list) or not isinstance(generated, list) or not prompts:
        raise UnusableInput(f"{path}: prompts and generated must be non-empty lists of token lists")
    if len(prompts) != len(generated):
        raise UnusableInput(f"{path}: {len(prompts)} prompts but {len(generated)} generated sequences")
    for b, (prompt, tokens) in enumerate(zip(prompts, generated)):
        for name, value in (("prompts", prompt), ("generated", tokens)):
            if not is_token_list(value, vocab) or not value:
                raise UnusableInput(f"{path}: {name}[{b}] is not a non-empty list of token ids in [0, {vocab})")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise UnusableInput(f"{path}: logits_steps is {steps!r}, not an integer >= 1")
    shortest = min(len(tokens) for tokens in generated)
    if steps > shortest:
        # Step i's logits pick generated[b][i]: more steps than tokens cannot be.
        raise UnusableInput(f"{path}: logits_steps {steps} but a sequence generated only {shortest} tokens")
    return prompts, generated, steps


def read_logits(dump_dir, steps, batch, vocab):
    """logits.npy, memory-mapped (the 1B model's vocabulary makes it about 0.5 MB per step and sequence)."""
    path = os.path.join(dump_dir, "logits.npy")
    if not os.path.isfile(path):
        raise UnusableInput(f"{path}: no such file")
    try:
        logits = np.load(path, mmap_mode="r")
    except (OSError, ValueError) as e:
        raise UnusableInput(f"{path}: cannot read it as a .npy array ({e})") from e
    expected = (steps, batch, vocab)
    if logits.shape != expected:
        raise UnusableInput(f"{path}: shape {logits.shape}, expected {expected} "
                            f"(logits_steps, sequences in generation.json, the config's vocab_size)")
    if logits.dtype.kind != "f":
        raise UnusableInput(f"{path}: dtype {logits.dtype}, expected float32")
    return logits


def step_shortfalls(generated, steps, required):
    """Messages for sequences (or the logits) with fewer than `required` steps to compare."""
    problems = []
    short = [b for b, tokens in enumerate(generated) if len(tokens) < required]
    if short:
        problems.append(f"{len(short)} sequence(s) generated fewer than {required} tokens "
                        f"(sequence {short[0]}: {len(generated[short[0]])})")
    if steps < required:
        problems.append(f"logits.npy holds {steps} steps, fewer than the {required} to compare")
    return problems


# ---------------------------------------------------------------------------------------------
# Hugging Face side.


def load_hf_model(model_dir, config, torch):
    """LlamaForCausalLM in bf16 on the GPU, eval mode; returns (model, attention implementation)."""
    import transformers
    from transformers import LlamaForCausalLM

    # transformers renamed torch_dtype to dtype (4.56); an unknown keyword could be taken for a
    # config attribute and leave the model in float32, so pick by version and check afterwards.
    try:
        version = tuple(int(part) for part in transformers.__version__.split(".")[:2])
    except ValueError:
        version = (5, 0)
    dtype_keyword = "dtype" if version >= (4, 56) else "torch_dtype"

    model, attention = None, None
    for attention in ("sdpa", "eager"):
        try:
            model = LlamaForCausalLM.from_pretrained(model_dir, attn_implementation=attention,
                                                     **{dtype_keyword: torch.bfloat16})
            break
        except (ValueError, ImportError) as e:
            # Raised when this attention implementation is unavailable: try the next. A bad
            # checkpoint fails the same way with eager, and that error is the one reported.
            if attention == "eager":
                raise UnusableInput(f"{model_dir}: transformers cannot load it ({e})") from e
        except Exception as e:  # safetensors and transformers raise several kinds for a bad file
            raise UnusableInput(f"{model_dir}: transformers cannot load it ({type(e).__name__}: {e})") from e

    if next(model.parameters()).dtype != torch.bfloat16:
        model = model.to(torch.bfloat16)  # the file is bf16: upcast and back is exact
    model = model.cuda().eval()
    verify_weights(model, model_dir, config.get("tie_word_embeddings", False), torch)
    return model, attention


def weight_files(model_dir):
    """The safetensors files of a checkpoint: model.safetensors, or the shards its index names."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.isfile(index):
        weight_map = read_json(index).get("weight_map", {})
        return [os.path.join(model_dir, name) for name in sorted(set(weight_map.values()))]
    return [os.path.join(model_dir, "model.safetensors")]


def verify_weights(model, model_dir, tied, torch):
    """Checks that HF holds exactly the file's tensors. A name HF did not recognise would leave
    that weight at random initialisation, which would show only as a large logits error."""
    from safetensors import safe_open

    state = model.state_dict()
    seen, unexpected, different = set(), [], []
    for path in weight_files(model_dir):
        try:
            with safe_open(path, framework="pt", device="cpu") as f:
                for name in f.keys():
                    if name not in state:
                        unexpected.append(name)
                        continue
                    seen.add(name)
                    mine = state[name]
                    if not torch.equal(f.get_tensor(name).to(device=mine.device, dtype=mine.dtype), mine):
                        different.append(name)
        except Exception as e:
            raise UnusableInput(f"{path}: cannot read it as safetensors ({type(e).__name__}: {e})") from e
    # With tied embeddings lm_head.weight is embed_tokens.weight and absent from the file.
    if tied and "lm_head.weight" in state:
        seen.add("lm_head.weight")
        if not torch.equal(state["lm_head.weight"], state["model.embed_tokens.weight"]):
            different.append("lm_head.weight (should be tied to model.embed_tokens.weight)")
    missing = sorted(set(state) - seen)
    if missing:
        raise UnusableInput(f"{model_dir}: the safetensors lack {len(missing)} tensor(s) the model has, "
                            f"such as {missing[0]}")
    if different:
        raise UnusableInput(f"{model_dir}: {len(different)} tensor(s) in HF's model differ from the file's, "
                            f"such as {sorted(different)[0]}")
    if unexpected:
        print(f"warning: {model_dir}: {len(unexpected)} tensor(s) the model does not use, "
              f"such as {sorted(unexpected)[0]}")
    if model.lm_head.out_features != model.config.vocab_size:
        raise UnusableInput(f"{model_dir}: lm_head has {model.lm_head.out_features} outputs, "
                            f"vocab_size is {model.config.vocab_size}")


def rope_description(hf_config, config):
    """HF's RoPE settings as it read them, with a warning when the base differs from config.json's
    (a wrong base would show only as a large logits error)."""
    params = getattr(hf_config, "rope_parameters", None)  # transformers 5
    if params is None:
        params = {"rope_theta": getattr(hf_config, "rope_theta", None),
                  "rope_scaling": getattr(hf_config, "rope_scaling", None)}
    params = dict(params)
    expected = config.get("rope_theta")
    if expected is not None and params.get("rope_theta") not in (None, expected):
        print(f"warning: HF uses rope_theta {params.get('rope_theta')}, config.json says {expected}")
    return params


def batches(indices, key, max_size):
    """Groups of at most max_size indices with equal key(index). Sequences of equal lengths can share
    a forward pass without padding, so no attention mask can change what HF computes."""
    groups = {}
    for i in indices:
        groups.setdefault(key(i), []).append(i)
    for members in groups.values():
        for start in range(0, len(members), max_size):
            yield members[start:start + max_size]


def relative_l2(a, b, torch):
    """||a - b|| / ||b|| over the last dimension."""
    norm = torch.linalg.vector_norm(b, dim=-1).clamp_min(torch.finfo(torch.float32).tiny)
    return torch.linalg.vector_norm(a - b, dim=-1) / norm


def hf_decode_logits(model, ids, p, steps, torch):
    """HF's logits for the same tokens fed one at a time through the KV cache, as a decoder does:
    set against HF's single forward they give this check's noise floor (HF against itself)."""
    out = model(input_ids=ids[:, :p], use_cache=True)
    logits = [out.logits[:, -1, :].float()]
    for i in range(1, steps):
        out = model(input_ids=ids[:, p + i - 1:p + i], past_key_values=out.past_key_values, use_cache=True)
        logits.append(out.logits[:, -1, :].float())
    return torch.stack(logits, dim=1)


def compare_logits(model, prompts, generated, ours, hf_batch, torch):
    """Teacher-forced HF logits against flowdsl's, per sequence and step.

    Returns arrays [batch, steps] (max_abs, mean_abs, rel_l2, hf_self_rel_l2, hf_argmax,
    our_argmax) and the moments (count, sum, sum of squares) of HF's logits for their standard
    deviation."""
    steps, batch, _ = ours.shape
    stats = {name: np.zeros((batch, steps)) for name in ("max_abs", "mean_abs", "rel_l2", "hf_self_rel_l2")}
    stats["hf_argmax"] = np.zeros((batch, steps), dtype=np.int64)
    stats["our_argmax"] = np.zeros((batch, steps), dtype=np.int64)
    moments = np.zeros(3)
    for rows in batches(range(batch), lambda b: len(prompts[b]), hf_batch):
        p = len(prompts[rows[0]])
        ids = torch.tensor([prompts[b] + generated[b][:steps - 1] for b in rows], device="cuda")
        logits = model(input_ids=ids, use_cache=False).logits
        # Position p-1 (last prompt token) picks generated[0]; position p-1+i picks generated[i].
        hf = logits[:, p - 1:p - 1 + steps, :].float()  # [rows, steps, vocab]
        del logits
        mine = torch.from_numpy(np.asarray(ours[:, rows, :], dtype=np.float32)).cuda().transpose(0, 1)
        diff = (mine - hf).abs()
        rel = relative_l2(mine, hf, torch)
        hf_self = relative_l2(hf_decode_logits(model, ids, p, steps, torch), hf, torch)
        # A NaN or infinity in flowdsl's logits must fail the check, not vanish from a max().
        finite = torch.isfinite(mine).all(dim=-1)
        rel = torch.where(finite, rel, torch.full_like(rel, float("inf")))
        for name, value in (("max_abs", diff.amax(dim=-1)), ("mean_abs", diff.mean(dim=-1)), ("rel_l2", rel),
                            ("hf_self_rel_l2", hf_self), ("hf_argmax", hf.argmax(dim=-1)),
                            ("our_argmax", mine.argmax(dim=-1))):
            stats[name][rows] = value.cpu().numpy()
        moments += [hf.numel(), hf.sum(dtype=torch.float64).item(), (hf * hf).sum(dtype=torch.float64).item()]
        del hf, mine, diff
    return stats, moments


def hf_greedy(model, prompt_rows, flowdsl_rows, torch):
    """Greedy decode of len(flowdsl_rows[0]) tokens after equal-length prompts, with the KV cache.

    A plain argmax loop rather than model.generate: the random checkpoint has no generation
    config, and LlamaConfig's default eos_token_id (2) would stop generate early, while
    min_new_tokens would mask that token's logit and so change the argmax. Returns per row and
    step HF's token, its top-2 logit gap and its margin over flowdsl's token (numpy arrays)."""
    n_new = len(flowdsl_rows[0])
    flowdsl_tokens = torch.tensor(flowdsl_rows, device="cuda")
    out = model(input_ids=torch.tensor(prompt_rows, device="cuda"), use_cache=True)
    tokens, gaps, margins = [], [], []
    for step in range(n_new):
        logits = out.logits[:, -1, :].float()
        token = logits.argmax(dim=-1)  # first index among ties, as generate's greedy search
        top2 = logits.topk(2, dim=-1).values
        gaps.append(top2[:, 0] - top2[:, 1])
        margins.append(top2[:, 0] - logits.gather(1, flowdsl_tokens[:, step:step + 1])[:, 0])
        tokens.append(token)
        if step + 1 < n_new:
            out = model(input_ids=token[:, None], past_key_values=out.past_key_values, use_cache=True)
    return [torch.stack(values, dim=1).cpu().numpy() for values in (tokens, gaps, margins)]


def compare_greedy(model, prompts, generated, ours, logit_stats, hf_batch, torch):
    """Greedy tokens against flowdsl's; returns (identical sequence count, first divergences)."""
    steps = ours.shape[0]
    identical, divergences = 0, []
    for rows in batches(range(len(prompts)), lambda b: (len(prompts[b]), len(generated[b])), hf_batch):
        tokens, gaps, margins = hf_greedy(model, [prompts[b] for b in rows], [generated[b] for b in rows], torch)
        for r, b in enumerate(rows):
            differ = np.flatnonzero(tokens[r] != np.asarray(generated[b]))
            if differ.size == 0:
                identical += 1
                continue
            i = int(differ[0])
            entry = {"sequence": b, "step": i, "flowdsl_token": generated[b][i], "hf_token": int(tokens[r][i]),
                     "hf_top2_gap": float(gaps[r][i]),
                     # HF's logit of its token minus that of flowdsl's: the error that flipped it.
                     "hf_margin": float(margins[r][i]),
                     "flowdsl_top2_gap": None}
            if i < steps:
                # Up to step i both saw the same tokens, so the teacher-forced comparison at step i
                # measures the very logits that chose differently.
                top2 = np.partition(np.asarray(ours[i, b], dtype=np.float32), -2)[-2:]
                entry["flowdsl_top2_gap"] = float(top2[1] - top2[0])
                entry["logits_max_abs"] = float(logit_stats["max_abs"][b, i])
            else:
                # Past the dumped logits: the sequence's largest error over the compared steps.
                entry["logits_max_abs"] = float(logit_stats["max_abs"][b].max())
            entry["near_tie"] = bool(entry["hf_margin"] <= entry["logits_max_abs"])
            divergences.append(entry)
    divergences.sort(key=lambda e: e["sequence"])
    return identical, divergences


# ---------------------------------------------------------------------------------------------
# Report.


def logits_summary(stats, moments, generated, rtol):
    count, total, squares = moments
    steps = stats["rel_l2"].shape[1]
    chosen = np.array([tokens[:steps] for tokens in generated])
    mean = total / count
    rel = stats["rel_l2"]
    return {
        "max_abs": float(stats["max_abs"].max()),
        "mean_abs": float(stats["mean_abs"].mean()),  # every (sequence, step) has the same vocab size
        "rel_l2_max": float(rel.max()),
        "rel_l2_mean": float(rel.mean()),
        "logit_std": float(np.sqrt(max(squares / count - mean * mean, 0.0))),
        # Not a criterion: how far HF's own decode path (KV cache) is from its single forward.
        "hf_self_rel_l2_max": float(stats["hf_self_rel_l2"].max()),
        "hf_self_rel_l2_mean": float(stats["hf_self_rel_l2"].mean()),
        "rel_l2_per_step": [float(v) for v in rel.max(axis=0)],  # worst sequence at each step
        "max_abs_per_step": [float(v) for v in stats["max_abs"].max(axis=0)],
        "argmax_agree_flowdsl_hf": float((stats["our_argmax"] == stats["hf_argmax"]).mean()),
        # Should be 1: the dump's step i picks generated[b][i]. Less means ties, or misaligned steps.
        "flowdsl_argmax_is_generated": float((stats["our_argmax"] == chosen).mean()),
        "steps": steps,
        "rtol": rtol,
        "pass": bool(rel.max() <= rtol),
    }


def print_report(summary, divergences, problems, environment):
    lg = summary["logits"]
    print(f"HF: transformers {environment['transformers']}, torch {environment['torch']}, "
          f"{environment['device']}, attention {environment['attn_implementation']}")
    print(f"rope: {environment['rope']}")
    print(f"\nlogits, teacher-forced, {summary['sequences']} sequences x {lg['steps']} steps:")
    print(f"  max abs {lg['max_abs']:.4g}, mean abs {lg['mean_abs']:.4g}, HF logit std {lg['logit_std']:.4g}")
    print(f"  relative L2: max {lg['rel_l2_max']:.4g}, mean {lg['rel_l2_mean']:.4g} (limit {lg['rtol']:g})")
    print(f"  HF against itself (KV-cache decode against one forward, same tokens): relative L2 "
          f"max {lg['hf_self_rel_l2_max']:.4g}, mean {lg['hf_self_rel_l2_mean']:.4g}")
    print(f"  argmax agrees with HF's at {100 * lg['argmax_agree_flowdsl_hf']:.1f}% of steps")
    if lg["flowdsl_argmax_is_generated"] < 1:
        print(f"  warning: flowdsl's own logits.npy argmax is its generated token at only "
              f"{100 * lg['flowdsl_argmax_is_generated']:.1f}% of steps (ties, or steps misaligned in the dump)")
    per_step = lg["rel_l2_per_step"]
    print("  relative L2 per step (worst sequence):")
    for start in range(0, len(per_step), 8):
        values = " ".join(f"{v:.4f}" for v in per_step[start:start + 8])
        print(f"    {start:4d}: {values}")
    print(f"  {'PASS' if lg['pass'] else 'FAIL'}")

    print(f"\ngreedy tokens: {summary['identical']} of {summary['sequences']} sequences identical "
          f"({100 * summary['fraction']:.1f}%, needs {100 * summary['min_identical']:.1f}%)")
    shown = 20
    for d in divergences[:shown]:
        flowdsl_gap = "" if d["flowdsl_top2_gap"] is None else f", flowdsl top-2 gap {d['flowdsl_top2_gap']:.4g}"
        print(f"  sequence {d['sequence']}: step {d['step']}: flowdsl {d['flowdsl_token']}, HF {d['hf_token']}; "
              f"HF top-2 gap {d['hf_top2_gap']:.4g}, HF margin over flowdsl's token {d['hf_margin']:.4g}{flowdsl_gap}, "
              f"logits max abs error there {d['logits_max_abs']:.4g}")
    if len(divergences) > shown:
        print(f"  ... and {len(divergences) - shown} more (all in --json)")
    if divergences:
        print(f"  {summary['near_tie_divergences']} of {len(divergences)} divergences are near ties "
              f"(HF's margin over flowdsl's token <= the logits' max abs error at that step)")
    if summary["allow_near_ties"]:
        print(f"  near ties count as matching (--allow-near-ties): "
              f"{summary['identical'] + summary['near_tie_divergences']} of {summary['sequences']}")
    print(f"  {'PASS' if summary['greedy_pass'] else 'FAIL'}")

    for problem in problems:
        print(f"\nFAIL: {problem}")
    print(f"\n{'PASS' if summary['pass'] else 'FAIL'}")


def write_json(path, data):
    if path:
        if os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(data, f, indent=2, default=str)  # default: HF's rope settings may hold odd types
            f.write("\n")


def run_checks(args):
    config = read_model_config(args.model)
    vocab = config["vocab_size"]
    prompts, generated, steps = read_generation(args.dump, vocab)
    ours = read_logits(args.dump, steps, len(prompts), vocab)
    problems = step_shortfalls(generated, steps, args.steps)

    import torch  # imported only once the input is known to be usable
    import transformers

    if not torch.cuda.is_available():
        raise UnusableInput("no CUDA device: this check runs HF on the GPU")
    # Keep cuBLAS's bf16 GEMMs accumulating in float throughout, so that HF is the careful side.
    try:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    except AttributeError:
        pass

    model, attention = load_hf_model(args.model, config, torch)
    environment = {"transformers": transformers.__version__, "torch": torch.__version__,
                   "device": torch.cuda.get_device_name(), "attn_implementation": attention,
                   "rope": rope_description(model.config, config)}
    with torch.no_grad():
        stats, moments = compare_logits(model, prompts, generated, ours, args.hf_batch, torch)
        identical, divergences = compare_greedy(model, prompts, generated, ours, stats, args.hf_batch, torch)

    n = len(prompts)
    logits = logits_summary(stats, moments, generated, args.logits_rtol)
    near_ties = sum(1 for d in divergences if d["near_tie"])
    matching = identical + (near_ties if args.allow_near_ties else 0)
    greedy_pass = matching / n >= args.min_identical
    summary = {
        "sequences": n, "identical": identical, "fraction": identical / n,
        "logits": logits, "first_divergence": divergences,
        "near_tie_divergences": near_ties, "allow_near_ties": args.allow_near_ties,
        "min_identical": args.min_identical, "greedy_pass": greedy_pass,
        "steps_required": args.steps, "problems": problems,
        "hf": environment,
        "pass": bool(logits["pass"] and greedy_pass and not problems),
    }
    print_report(summary, divergences, problems, environment)
    write_json(args.json, summary)
    return EXIT_PASS if summary["pass"] else EXIT_FAIL


def main(argv):
    args = parse_args(argv)
    try:
        return run_checks(args)
    except UnusableInput as e:
        print(f"error: {e}", file=sys.stderr)
        write_json(args.json, {"error": str(e), "pass": False})
        return EXIT_UNUSABLE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
