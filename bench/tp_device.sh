#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Llama decode step split across the GPUs of one host (tensor parallel, `llm_decode --ranks`,
# one process a GPU under mpirun) against one GPU, in one call on a machine with two GPUs: greedy
# tokens of 32 steps equal to the one-GPU run's (a trained tiny model, whose logits have clear
# winners, and the random 1B checkpoint), then the step timed at batches 1, 8, 32, 64 on one GPU
# and on RANKS GPUs, three runs each.
#
#   RANKS=2 bash bench/tp_device.sh          (from the repository root; build/ carried there)
#
# Writes under $OUT (default ./device-out) the logs, the figures as JSON and summary.txt.
set -u
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
RANKS=${RANKS:-2}
MODEL=${MODEL:-/tmp/llama1b}
export NCCL_NVLS_ENABLE=0
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpus.txt" 2>&1
log "GPUs: $(tr '\n' ';' < "$OUT/gpus.txt")"
MPIRUN="mpirun --allow-run-as-root --oversubscribe -np $RANKS"

# The one-rank path (the all-reduces sum one part) against the host reference.
build/samples/llm_decode --check --ranks > "$OUT/one_rank.log" 2>&1
log "llm_decode --check --ranks (one process): exit $?; $(grep -E '^check' "$OUT/one_rank.log" | tr '\n' ' ')"

[ -f /tmp/tiny/model.safetensors ] || python3 scripts/train_tiny_llama.py --out /tmp/tiny > "$OUT/train.log" 2>&1
[ -f "$MODEL/model.safetensors" ] || python3 scripts/make_llama_checkpoint.py --preset llama-3.2-1b --out "$MODEL" \
  > "$OUT/checkpoint.log" 2>&1
for model in /tmp/tiny "$MODEL"; do
  tag=$(basename "$model")
  rm -rf "/tmp/one_$tag" "/tmp/tp_$tag" && mkdir -p "/tmp/one_$tag" "/tmp/tp_$tag"
  build/samples/llm_decode --model "$model" --batch 8 --prompt 48 --generate 32 --dump "/tmp/one_$tag" \
    > "$OUT/tokens_one_$tag.log" 2>&1
  $MPIRUN build/samples/llm_decode --ranks --model "$model" --batch 8 --prompt 48 --generate 32 --dump "/tmp/tp_$tag" \
    > "$OUT/tokens_tp_$tag.log" 2>&1
  log "$tag: one GPU and $RANKS ranks ran (exit $?); $(python3 -c "
import json
a = json.load(open('/tmp/one_$tag/generation.json'))['generated']
b = json.load(open('/tmp/tp_$tag/generation.json'))['generated']
same = sum(x == y for x, y in zip(a, b))
first = [next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), None) for x, y in zip(a, b)]
print(f'greedy tokens identical on {same} of {len(a)} sequences; first difference at steps {first}')
" 2>&1)"
done

for run in 1 2 3; do
  build/samples/llm_decode --model "$MODEL" --bench --batches 1,8,32,64 --context 512 --steps 100 --runs 1 \
    --json "$OUT/one_gpu_$run.json" > "$OUT/bench_one_$run.log" 2>&1
  log "one GPU, run $run: exit $?"
  grep -E '^batch' "$OUT/bench_one_$run.log" >> "$OUT/summary.txt"
  $MPIRUN build/samples/llm_decode --ranks --model "$MODEL" --bench --batches 1,8,32,64 --context 512 --steps 100 \
    --runs 1 --json "$OUT/tp_$run.json" > "$OUT/bench_tp_$run.log" 2>&1
  log "$RANKS ranks, run $run: exit $?"
  grep -E '^batch|^tensor' "$OUT/bench_tp_$run.log" >> "$OUT/summary.txt"
done
