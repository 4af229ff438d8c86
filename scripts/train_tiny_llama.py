#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trains a tiny Llama on a synthetic language and saves it as a Hugging Face checkpoint.

Random weights make a poor greedy check: their logits are flat, so two correct bf16 paths that add
in different orders pick different tokens wherever the top two nearly tie, and one flip changes the
rest of the sequence. A trained model is confident. No checkpoint can be downloaded on the GPU
machine, so this script trains one there in seconds: LlamaForCausalLM with the `tiny` shapes of
make_llama_checkpoint.py (2 layers, hidden 256, 4 query and 2 key/value heads of 64, MLP 512,
vocabulary 1024, tied embeddings) learns the rule

    token[t + 1] = perm[token[t - 1]]        (perm: a fixed random permutation of the vocabulary)

after a random prefix of 2 to 48 tokens: the next token is the image of the one two back, which a
layer can only find by attending to it, so the check runs through attention, rotary embeddings and
the cache. It writes config.json and model.safetensors (bf16) with save_pretrained, the layout of a
real checkpoint, and prints the accuracy and the mean gap between the top two logits on fresh
sequences.

    python3 scripts/train_tiny_llama.py --out /tmp/tiny_trained
    build/samples/llm_decode --model /tmp/tiny_trained --batch 8 --prompt 48 --generate 40 --dump /tmp/d
    python3 scripts/check_llama_hf.py --model /tmp/tiny_trained --dump /tmp/d

Needs PyTorch (a CUDA device when there is one) and transformers.
"""

import argparse
import sys
import time


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder to write config.json and model.safetensors into")
    parser.add_argument("--steps", type=int, default=1500, help="optimiser steps (default 1500)")
    parser.add_argument("--batch", type=int, default=64, help="sequences a step (default 64)")
    parser.add_argument("--length", type=int, default=128, help="tokens a sequence (default 128)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def sequences(perm, batch, length, generator, torch):
    """[batch, length] token ids and a mask of the positions the rule predicts (after each prefix)."""
    vocab = perm.numel()
    tokens = torch.randint(0, vocab, (batch, length), generator=generator, device=perm.device)
    prefix = torch.randint(2, 49, (batch,), generator=generator, device=perm.device)
    for t in range(2, length):
        ruled = perm[tokens[:, t - 2]]
        tokens[:, t] = torch.where(t >= prefix, ruled, tokens[:, t])
    positions = torch.arange(length, device=perm.device)
    predicted = positions[None, :] >= prefix[:, None]  # token t follows the rule
    return tokens, predicted


def main(argv):
    args = parse_args(argv)
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(args.seed)
    generator = torch.Generator(device=device)
    generator.manual_seed(args.seed)
    vocab = 1024
    perm = torch.randperm(vocab, generator=generator, device=device)
    config = LlamaConfig(vocab_size=vocab, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=2048,
                         rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=None,
                         eos_token_id=None, pad_token_id=None)
    model = LlamaForCausalLM(config).to(device)
    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=3e-3, total_steps=args.steps, pct_start=0.1)
    start = time.time()
    for step in range(args.steps):
        tokens, predicted = sequences(perm, args.batch, args.length, generator, torch)
        logits = model(input_ids=tokens).logits[:, :-1].float()
        target = tokens[:, 1:]
        mask = predicted[:, 1:]
        loss = torch.nn.functional.cross_entropy(logits[mask], target[mask])
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        schedule.step()
        if step % 250 == 0 or step == args.steps - 1:
            print(f"step {step}: loss {loss.item():.4f} ({time.time() - start:.1f} s)", flush=True)

    model.eval()
    model = model.to(torch.bfloat16)
    with torch.no_grad():
        tokens, predicted = sequences(perm, 256, args.length, generator, torch)
        logits = model(input_ids=tokens).logits[:, :-1].float()
        mask = predicted[:, 1:]
        top = logits[mask].topk(2, dim=-1)
        accuracy = (top.indices[:, 0] == tokens[:, 1:][mask]).float().mean().item()
        gap = (top.values[:, 0] - top.values[:, 1]).mean().item()
    print(f"bf16 model on fresh sequences: accuracy {accuracy:.4f}, mean gap between the top two logits {gap:.2f}")
    model.save_pretrained(args.out)
    print(f"wrote {args.out}")
    return 0 if accuracy > 0.99 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
