#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Hopper matmul on the device machine in one call: builds what it needs if it is not there
# yet, then runs
#   1. test_kernels "[matmul]"          every matmul test (float64 host reference, poisoned outputs),
#      the split variants at the serving shapes, updates and programmatic edges included
#   2. compute-sanitizer memcheck and racecheck on "[matmul][update]" and "[split]"
#      (TMA path, generic path, re-derived tensor maps, cast variant, clusters splitting k)
#   3. kernels_bench --matmul-only --matmul-sweep   f16/bf16 (float c) and the cast variant vs
#      cuBLAS at 4096^3, 1024^3, 128 x 4096 x 4096 and the serving MLP's shapes, with
#      ||flowdsl - cuBLAS|| / ||cuBLAS||; then every variant (tile width, split) at each shape
#   4. RUNS (default 3) times: bench/mlp_bench (flowdsl's built-in matmul on programmatic edges,
#      with copies and with the pinned input and output read and written by the kernels,
#      cuBLASLt library nodes, a hand-written cuBLASLt graph) beside bench/torch_mlp.py (PyTorch's
#      CUDA graph of the same MLP and weights)
# Logs go under $OUT (one file a step); the end of the output is a short summary. Exits non-zero
# when a step failed.
#
#   bash bench/matmul_device.sh                  # BUILD=build-device by default
#   BUILD=build bash bench/matmul_device.sh      # reuse a carried build folder
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-device}
OUT=${OUT:-/tmp/matmul_device}
mkdir -p "$OUT"
status=0

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$OUT/gpu.txt" 2>&1
RUNS=${RUNS:-3}
export NCCL_NVLS_ENABLE=0
if [ ! -x "$BUILD/tests/test_kernels" ] || [ ! -x "$BUILD/bench/kernels_bench" ] || [ ! -x "$BUILD/bench/mlp_bench" ]; then
  echo "== building test_kernels, kernels_bench and mlp_bench in $BUILD"
  if ! { cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
         cmake --build "$BUILD" -j"$(nproc)" --target test_kernels kernels_bench mlp_bench; } >"$OUT/build.log" 2>&1; then
    echo "build failed:"
    tail -n 40 "$OUT/build.log"
    exit 1
  fi
fi

step() {
  local name=$1
  shift
  echo "== $name: $*"
  local start=$SECONDS
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "   exit $rc after $((SECONDS - start)) s (log: $OUT/$name.log)"
  [ "$rc" -eq 0 ] || status=1
  tail -n 4 "$OUT/$name.log"
}

SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step tests "$BUILD/tests/test_kernels" "[matmul]"
step memcheck "$SANITIZER" --tool memcheck --error-exitcode 9 "$BUILD/tests/test_kernels" "[matmul][update],[split]"
step racecheck "$SANITIZER" --tool racecheck --error-exitcode 9 "$BUILD/tests/test_kernels" "[matmul][update],[split]"
step bench "$BUILD/bench/kernels_bench" --matmul-only --matmul-sweep --json "$OUT/kernels_bench_matmul.json"
weights=$(mktemp -d)
for i in $(seq 1 "$RUNS"); do
  step "mlp_$i" "$BUILD/bench/mlp_bench" --repeats 1000 --warmup 200 --weights "$weights" --json "$OUT/mlp_$i.json"
  step "torch_$i" python3 "$ROOT/bench/torch_mlp.py" --weights "$weights" --style linear --json "$OUT/torch_$i.json"
done

echo
echo "== summary ($(head -n 2 "$OUT/gpu.txt" | tail -n 1))"
grep -E "test cases|All tests passed" "$OUT/tests.log" | tail -n 1
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/memcheck.log" "$OUT/racecheck.log"
grep -E "^matmul .*cuBLAS\|\|" "$OUT/bench.log"
grep -E "^matmul" "$OUT/bench.log" | grep -E "flowdsl|cuBLAS" | grep -v "||"
echo "-- the launch rule's variant at each shape (bf16, float c): us, cuBLAS us, cuBLAS / flowdsl"
grep -E " rule\* " "$OUT/bench.log"
for i in $(seq 1 "$RUNS"); do
  echo "-- run $i: mlp_bench (us a batch), then PyTorch's CUDA graph"
  grep -E "^ *(rows|[0-9]+ )" "$OUT/mlp_$i.log" | head -n 5
  grep -E "torch_graph|rows" "$OUT/torch_$i.log" | head -n 6
done
exit $status
