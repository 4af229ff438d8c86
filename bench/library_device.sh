#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One device call for library nodes: their gpu tests (plain and under compute-sanitizer
# memcheck) and the profiler's, three runs of bench/mlp_bench each beside PyTorch's CUDA graph
# of the same MLP (bench/torch_mlp.py, both of its forms in the first run), the serving
# sample's smoke run and mlp_inference with cuBLASLt nodes.
# Usage: bench/library_device.sh [DIR holding test_library_gpu, test_profiler_gpu, mlp_bench,
# serving, mlp_inference] (default: the build tree's places); logs go to $OUT (default
# /tmp/library_device).
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:-}
bin() { if [ -n "$dir" ]; then echo "$dir/$1"; else case $1 in
  test_library_gpu|test_profiler_gpu) echo build/tests/$1 ;; mlp_bench) echo build/bench/$1 ;; serving|mlp_inference) echo build/samples/$1 ;; esac; fi; }
out=${OUT:-/tmp/library_device}
mkdir -p "$out"
log="$out/library_device.log"
status=0
run() {  # a step, its output to the log, its summary line to the terminal
  echo "== $*" | tee -a "$log"
  "$@" >>"$log" 2>&1 || { echo "   FAILED ($?)" | tee -a "$log"; status=1; }
  tail -n 3 "$log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee -a "$log"
run "$(bin test_library_gpu)"
# Memcheck reports CUDA API errors too: the test cases tagged [errors] make calls fail on
# purpose, so they run with API errors unreported (memory errors still count).
run compute-sanitizer --tool memcheck --error-exitcode 9 "$(bin test_library_gpu)" "~[errors]"
run compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$(bin test_library_gpu)" "[errors]"
run "$(bin test_profiler_gpu)" "[library]"
weights=$(mktemp -d)
for i in 1 2 3; do
  profile=()  # the first run also says where the time goes, after its figures
  if [ "$i" = 1 ]; then profile=(--profile); fi
  run "$(bin mlp_bench)" --repeats 1000 --warmup 200 --weights "$weights" --json "$out/mlp_$i.json" "${profile[@]}"
  run python3 bench/torch_mlp.py --weights "$weights" --style linear --json "$out/torch_linear_$i.json" "${profile[@]}"
  if [ "$i" = 1 ]; then run python3 bench/torch_mlp.py --weights "$weights" --style float_accumulate; fi
done
run "$(bin serving)" --quick
run "$(bin mlp_inference)" --gemm cublaslt
grep -E "^(  |rows| *[0-9]+ |re-recording|hit launch|torch_graph|mlp_bench|serving:|capacity|GPU time|graph replay|  with|kernels one|cache:|All tests|test cases|==|   FAILED)" "$log"
exit $status
