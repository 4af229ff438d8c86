#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Llama decode step on the GPU machine, from a build carried there (build/): the decoder's
# kernel tests (also under memcheck), the sample against its host reference, a random
# Llama-3.2-1B-shaped checkpoint and a tiny trained one checked against Hugging Face transformers,
# and flowdsl's step timed beside PyTorch's (eager, CUDA graph, torch.compile) on the same weights, in one run.
#
#   bash bench/llm_device.sh                 (from the repository root, on the GPU machine)
#   STEPS="bench torch" bash bench/llm_device.sh
#   OLD=/tmp/before/llm_decode STEPS="ab ncu" bash bench/llm_device.sh   (a change's A/B, Nsight Compute)
#   STEPS=family bash bench/llm_device.sh   (the step's family of batch buckets beside PyTorch's bucket pool)
#   STEPS=loop bash bench/llm_device.sh     (64 decode steps a launch on the device beside 64 host launches)
#   STEPS=serving bash bench/llm_device.sh  (llm_serving at several arrival rates)
#   STEPS=coldstart bash bench/llm_device.sh  (buckets 1 .. 256 as one graph file: process start to ready)
#
# Writes under $OUT (default ./device-out) a log per step, the figures as JSON, and summary.txt.
set -u
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
MODEL=${MODEL:-/tmp/llama1b}
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
configured=$(sed -n 's/^# Build directory: //p' build/CTestTestfile.cmake)
if [ -n "$configured" ] && [ "$configured" != "$PWD/build" ] && [ ! -e "$configured" ]; then
  mkdir -p "$(dirname "$(dirname "$configured")")" && ln -s "$PWD" "$(dirname "$configured")"
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
log "device: $(cat "$OUT/gpu.txt")"

# llm_decode on a checkpoint (8 sequences, 40 tokens, its logits dumped), then the dump against
# Hugging Face transformers: check_against_hf MODEL TAG LABEL, logs named by TAG.
check_against_hf() {
  local model=$1 tag=$2 label=$3 dump=/tmp/dump_$2
  mkdir -p "$dump"
  build/samples/llm_decode --model "$model" --batch 8 --prompt 48 --generate 40 --chunk 16 --dump "$dump" \
    > "$OUT/sample_$tag.log" 2>&1
  log "llm_decode $label, batch 8: exit $?; $(grep -E '^decode|^prefill' "$OUT/sample_$tag.log" | tr '\n' ' ')"
  PYTHONUNBUFFERED=1 python3 scripts/check_llama_hf.py --model "$model" --dump "$dump" --json "$OUT/hf_check_$tag.json" \
    > "$OUT/hf_check_$tag.log" 2>&1
  log "check against transformers, $label: exit $?; $(tail -3 "$OUT/hf_check_$tag.log" | tr '\n' ' ')"
}

steps=${STEPS:-"kernels sample checkpoint hf trained graph bench torch family loop memcheck"}
for step in $steps; do
  case $step in
    kernels)
      build/tests/test_kernels "[decoder],[sampling],[decode_loop]" > "$OUT/kernels.log" 2>&1
      log "test_kernels [decoder],[sampling],[decode_loop]: exit $?; $(grep -E 'test cases|All tests passed' "$OUT/kernels.log" | tail -1)"
      ;;
    memcheck)
      timeout "${MEMCHECK_TIMEOUT:-300}" compute-sanitizer --tool memcheck build/tests/test_kernels "[decoder],[sampling],[decode_loop]" \
        > "$OUT/memcheck.log" 2>&1
      log "memcheck [decoder],[sampling],[decode_loop]: exit $?; $(grep -E 'ERROR SUMMARY|test cases' "$OUT/memcheck.log" | tail -2 | tr '\n' ' ')"
      compute-sanitizer --tool racecheck build/tests/test_kernels "[sampling]" > "$OUT/racecheck.log" 2>&1
      log "racecheck [sampling]: exit $?; $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck.log" | tail -1)"
      ;;
    sample)
      for args in "--check" "--check --linear cublaslt --batch 3 --chunk 7" "--check --linear gemv --programmatic --batch 16" "--check --linear cublaslt --programmatic --batch 12" "--check --linear gemv --batch 9" \
                  "--temperature 0.8 --top-k 40 --top-p 0.9"; do
        build/samples/llm_decode $args > "$OUT/sample.log" 2>&1
        log "llm_decode $args: exit $?; $(grep -E '^check|^decode' "$OUT/sample.log" | tr '\n' ' ')"
      done
      for args in "--loop 16 --batches 1,3,12" "--loop 9 --batches 5 --linear gemv --programmatic"; do
        build/samples/llm_decode $args --runs 1 > "$OUT/sample_loop.log" 2>&1
        log "llm_decode $args: exit $?; $(grep -E 'differ' "$OUT/sample_loop.log" | tr '\n' ' ')"
      done
      ;;
    checkpoint)
      [ -f "$MODEL/model.safetensors" ] && { log "checkpoint: $MODEL already there"; continue; }
      start=$(date +%s%N)
      python3 scripts/make_llama_checkpoint.py --preset llama-3.2-1b --out "$MODEL" --seed 3 > "$OUT/checkpoint.log" 2>&1
      log "checkpoint llama-3.2-1b: exit $?; $(( ($(date +%s%N) - start) / 1000000 )) ms"
      ;;
    hf)
      check_against_hf "$MODEL" 1b "1B"
      ;;
    trained)
      # Random weights make greedy tokens a poor check (flat logits: near-ties flip): a tiny Llama
      # trained here on a rule it predicts confidently, saved by transformers, checked the same way.
      PYTHONUNBUFFERED=1 timeout 240 python3 scripts/train_tiny_llama.py --out /tmp/tiny_trained > "$OUT/train.log" 2>&1
      log "train a tiny Llama: exit $?; $(grep -E '^bf16 model' "$OUT/train.log")"
      check_against_hf /tmp/tiny_trained trained "trained tiny model"
      ;;
    graph)
      # The decode step as a graph file (weights by safetensors reference), run by the tool: its
      # tokens after 16 launches must equal the C++ graph's.
      rm -rf /tmp/graph && build/samples/llm_decode --model "$MODEL" --batch 4 --generate 16 --write-graph /tmp/graph \
        > "$OUT/graph.log" 2>&1
      log "llm_decode --write-graph: exit $?; $(tail -1 "$OUT/graph.log")"
      start=$(date +%s%N)
      build/src/flowdsl run -n 16 /tmp/graph/decode.json --out /tmp/graph/out >> "$OUT/graph.log" 2>&1
      log "flowdsl run -n 16 decode.json: exit $?; $(( ($(date +%s%N) - start) / 1000000 )) ms from process start"
      python3 -c "import numpy as np; a = np.load('/tmp/graph/out/tokens.npy'); b = np.load('/tmp/graph/expected_tokens.npy'); print('graph file tokens', 'EQUAL' if (a == b).all() else 'DIFFER', a.tolist(), b.tolist())" \
        >> "$OUT/summary.txt" 2>&1
      ;;
    coldstart)
      # Every bucket 1 .. 256 in one graph file (a SWITCH picking the bucket of batch.npy), from
      # process start to the first launch's end, three times: the load phases (weights upload
      # apart) and the instantiation of all buckets; its tokens against the C++ graph's.
      rm -rf /tmp/family && build/samples/llm_decode --model "$MODEL" --batch 8 --generate 4 --family 256 \
        --programmatic --write-graph /tmp/family > "$OUT/coldstart.log" 2>&1
      log "llm_decode --write-graph --family 256: exit $?; $(tail -1 "$OUT/coldstart.log")"
      for run in 1 2 3; do
        start=$(date +%s%N)
        build/src/flowdsl run -n 4 /tmp/family/decode.json --out /tmp/family/out > "$OUT/coldstart_$run.log" 2>&1
        log "flowdsl run family graph ($run): exit $?; $(( ($(date +%s%N) - start) / 1000000 )) ms from process start; $(grep -E '^load|^ready|^launch 1|^first launch' "$OUT/coldstart_$run.log" | tr '\n' ' ')"
      done
      python3 -c "import numpy as np; a = np.load('/tmp/family/out/tokens.npy')[:8]; b = np.load('/tmp/family/expected_tokens.npy')[:8]; print('family graph file tokens', 'EQUAL' if (a == b).all() else 'DIFFER', a.tolist(), b.tolist())" \
        >> "$OUT/summary.txt" 2>&1
      ;;
    profile)
      # Where a step's time goes, node by node: the step at context 512 as a graph file, under CUPTI.
      for batch in ${PROFILE_BATCHES:-1 64}; do
        build/samples/llm_decode --model "$MODEL" --batch "$batch" --generate 8 --graph-position 512 \
          --write-graph "/tmp/profile$batch" > /dev/null 2>&1
        build/src/flowdsl profile -n 20 "/tmp/profile$batch/decode.json" > "$OUT/profile_b$batch.txt" 2>&1
        log "flowdsl profile, batch $batch: exit $?"
      done
      ;;
    ab)
      # The step of the build carried beside this one (OLD=path of its llm_decode) and of this
      # one, in one call: what a change did to the figures.
      for bin in "${OLD:-}" build/samples/llm_decode; do
        [ -x "$bin" ] || { log "ab: no binary at '$bin'"; continue; }
        "$bin" --model "$MODEL" --bench --batches "${AB_BATCHES:-1,8,64}" --context 512 --steps 100 --runs 2 --profile 0 \
          > "$OUT/ab_$(basename "$(dirname "$bin")")_$(basename "$bin").log" 2>&1
        log "ab $bin: exit $?"
        grep -E '^batch|^prefill' "$OUT/ab_$(basename "$(dirname "$bin")")_$(basename "$bin").log" >> "$OUT/summary.txt"
      done
      ;;
    ncu)
      # Nsight Compute's view of the batch-1 step (graph file at context 512): embed and the
      # first two layers' kernels, then the LM head and argmax. Clocks left as they are.
      build/samples/llm_decode --model "$MODEL" --batch 1 --generate 8 --graph-position 512 --write-graph /tmp/ncu1 \
        > /dev/null 2>&1
      sections="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis"
      timeout 120 ncu --clock-control none $sections --launch-skip 0 --launch-count 15 \
        build/src/flowdsl run -n 1 /tmp/ncu1/decode.json --out /tmp/ncu1/a > "$OUT/ncu_layers.txt" 2>&1
      log "ncu, embed and layers 0-1: exit $?"
      timeout 60 ncu --clock-control none $sections -k regex:'argmax|linear_norm' --launch-skip 32 --launch-count 2 \
        build/src/flowdsl run -n 1 /tmp/ncu1/decode.json --out /tmp/ncu1/b > "$OUT/ncu_head.txt" 2>&1
      log "ncu, LM head and argmax: exit $?"
      ;;
    bench)
      build/samples/llm_decode --model "$MODEL" --bench --batches 1,8,32,64 --context 512 --steps 100 --runs 3 \
        --profile "${PROFILE:-20}" --json "$OUT/flowdsl_decode.json" > "$OUT/bench.log" 2>&1
      log "flowdsl bench: exit $?"
      cat "$OUT/bench.log" >> "$OUT/summary.txt"
      ;;
    family)
      # The decode step as a family of buckets 1 .. 256 (made ready up front, memory of each
      # executable, each bucket's step), beside PyTorch capturing the same 9 buckets into one pool.
      build/samples/llm_decode --model "$MODEL" --family 256 --programmatic --context 512 --steps 50 --runs 3 \
        --json "$OUT/flowdsl_family.json" > "$OUT/family.log" 2>&1
      log "flowdsl family: exit $?"
      cat "$OUT/family.log" >> "$OUT/summary.txt"
      PYTHONUNBUFFERED=1 timeout 300 python3 bench/llm_decode_torch.py --model "$MODEL" --batches 1 --context 512 \
        --runs 1 --repeat 20 --no-compile --prefill-seqs 0 --bucket-pool --pool-buckets 1,2,4,8,16,32,64,128,256 \
        --json "$OUT/torch_family.json" > "$OUT/torch_family.log" 2>&1
      log "torch bucket pool: exit $?"
      tail -14 "$OUT/torch_family.log" >> "$OUT/summary.txt"
      ;;
    loop)
      # 64 decode steps in one launch (a WHILE on the device) beside 64 launches from the host:
      # tokens checked equal (also with an end token and length limits), GPU and host time.
      build/samples/llm_decode --model "$MODEL" --loop 64 --batches 1,8 --programmatic --context 512 --runs 3 \
        --json "$OUT/flowdsl_loop.json" > "$OUT/loop.log" 2>&1
      log "flowdsl device loop: exit $?"
      cat "$OUT/loop.log" >> "$OUT/summary.txt"
      ;;
    serving)
      # Poisson arrivals, continuous batching, the family of step graphs over token buckets (C++).
      timeout 400 build/samples/llm_serving --model "$MODEL" --rates "${RATES:-8,16,32,64}" --requests "${REQUESTS:-100}" \
        --json "$OUT/flowdsl_serving.json" > "$OUT/serving.log" 2>&1
      log "flowdsl serving: exit $?"
      cat "$OUT/serving.log" >> "$OUT/summary.txt"
      # The same workload from Python, one loop for both: flowdsl's family on torch tensors, then
      # PyTorch's per-bucket CUDA graphs.
      for engine in flowdsl torch; do
        PYTHONPATH=build/python PYTHONUNBUFFERED=1 timeout 400 python3 bench/llm_serving.py --model "$MODEL" \
          --engine $engine --rates "${RATES:-8,16,32,64}" --requests "${REQUESTS:-100}" \
          --json "$OUT/py_serving_$engine.json" > "$OUT/py_serving_$engine.log" 2>&1
        log "python serving, $engine: exit $?"
        tail -6 "$OUT/py_serving_$engine.log" >> "$OUT/summary.txt"
      done
      ;;
    torch_graphs)
      # PyTorch's eager step and CUDA graphs (no torch.compile: see torch_compile), and the bucket pool.
      PYTHONUNBUFFERED=1 timeout 200 python3 bench/llm_decode_torch.py --model "$MODEL" --batches 1,8,32,64 --context 512 \
        --runs 3 --repeat 100 --no-compile --bucket-pool --json "$OUT/torch_graphs.json" > "$OUT/torch_graphs.log" 2>&1
      log "torch bench (graphs): exit $?"
      tail -30 "$OUT/torch_graphs.log" >> "$OUT/summary.txt"
      ;;
    torch_compile)
      PYTHONUNBUFFERED=1 timeout "${COMPILE_TIMEOUT:-200}" python3 bench/llm_decode_torch.py --model "$MODEL" \
        --batches "${COMPILE_BATCHES:-1,8,32,64}" --context 512 --runs 3 --repeat 100 --prefill-seqs 0 \
        --json "$OUT/torch_compile.json" > "$OUT/torch_compile.log" 2>&1
      log "torch bench (compile): exit $?"
      tail -12 "$OUT/torch_compile.log" >> "$OUT/summary.txt"
      ;;
    torch)
      PYTHONUNBUFFERED=1 timeout 400 python3 bench/llm_decode_torch.py --model "$MODEL" --batches 1,8,32,64 --context 512 \
        --runs 3 --repeat 100 --bucket-pool --json "$OUT/torch_decode.json" > "$OUT/torch.log" 2>&1
      log "torch bench: exit $?"
      tail -30 "$OUT/torch.log" >> "$OUT/summary.txt"
      ;;
  esac
done
