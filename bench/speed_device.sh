#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The runtime's speed figures three times in one device call (a goal holds when it holds in each
# run), with the GPU tests first:
#   0. ctest -L gpu, and compute-sanitizer memcheck over the element-wise and random kernels
#   1. RUNS (default 3) times: flowdsl_bench (builds, hit launches, replay, updates, streams)
#      and programmatic_bench (a chain of scale.f32 with full and programmatic edges)
#   2. bench/torch_compare.py (its own three repetitions, PyTorch in the same process pair)
#   3. RUNS times kernels_bench --only random (the random fills against the copy of the same
#      run), then Nsight Compute's issue and pipe utilisation of random_normal and its SASS size
#   4. RUNS times flowdsl_bench_host (declare, validate, plan, hash at 100 000 nodes; host only)
#   5. the whole kernels_bench once (every built-in kernel against the copy and cuBLAS)
# Parts: PARTS="tests runtime torch random host kernels" by default, any of them, in that order.
# Logs go under $OUT (one file a step) and into $OUT.tar.gz; the output ends with a summary. Exits
# non-zero when a step failed. Uses the build folder $BUILD (default build/, carried from the
# development machine).
#
#   bash bench/speed_device.sh
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
OUT=${OUT:-/tmp/speed_device}
RUNS=${RUNS:-3}
PARTS=${PARTS:-tests runtime torch random host kernels}
has() { [[ " $PARTS " == *" $1 "* ]]; }
mkdir -p "$OUT"
status=0
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$OUT/gpu.txt" 2>&1

step() {
  local name=$1
  shift
  echo "== $name: $*"
  local start=$SECONDS
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "   exit $rc after $((SECONDS - start)) s"
  [ "$rc" -eq 0 ] || status=1
}

SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if has tests; then
  step ctest bash -c "cd '$BUILD' && ctest -L gpu --output-on-failure"
  step memcheck "$SANITIZER" --tool memcheck --error-exitcode 9 "$BUILD/tests/test_kernels" "[elementwise],[random]"
fi
if has runtime; then
  for i in $(seq 1 "$RUNS"); do
    step "flowdsl_bench_$i" "$BUILD/bench/flowdsl_bench" --json "$OUT/flowdsl_bench_$i.json"
    step "programmatic_$i" "$BUILD/bench/programmatic_bench" --json "$OUT/programmatic_$i.json"
  done
fi
if has torch; then
  step torch_compare python3 "$ROOT/bench/torch_compare.py" --flowdsl "$BUILD/bench/torch_compare_bench" \
    --json "$OUT/torch_compare.json"
fi
if has random; then
  for i in $(seq 1 "$RUNS"); do
    step "random_$i" "$BUILD/bench/kernels_bench" --only random --json "$OUT/random_$i.json"
  done
  pipes=sm__issue_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active
  pipes=$pipes,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active
  pipes=$pipes,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,dram__bytes_write.sum
  step ncu_random ncu --clock-control none --metrics "$pipes" -k regex:random_normal_kernel --launch-skip 3 --launch-count 1 \
    "$BUILD/bench/kernels_bench" --quick --repeats 1 --only random_normal
  if command -v cuobjdump >/dev/null; then
    cuobjdump --dump-sass "$BUILD/bench/kernels_bench" 2>/dev/null |
      awk '/Function : /{f = index($0, "random_normal_kernelIfE") > 0} f' >"$OUT/sass_random_normal.txt"
  fi
fi
if has host; then
  for i in $(seq 1 "$RUNS"); do step "host_$i" "$BUILD/bench/flowdsl_bench_host"; done
fi
if has kernels; then
  step kernels "$BUILD/bench/kernels_bench" --json "$OUT/kernels.json"
fi

echo
echo "== summary ($(tail -n 1 "$OUT/gpu.txt"))"
if has tests; then
  grep -E "tests passed|tests failed" "$OUT/ctest.log" | tail -n 1
  grep -E "ERROR SUMMARY" "$OUT/memcheck.log"
fi
if has runtime; then
  for i in $(seq 1 "$RUNS"); do
    python3 "$ROOT/bench/report.py" "$OUT/flowdsl_bench_$i.json" >"$OUT/report_$i.txt" 2>&1
    echo "-- run $i: hit launch and streams (report.py), programmatic_bench"
    awk '/^(Hit launch, host|Streams:)/ {f = 1; t = 0; next} f && /^\| [0-9]/ {print; t = 1; next} f && t && !/^\|/ {f = 0}' \
      "$OUT/report_$i.txt"
    grep -E "^  |gain" "$OUT/programmatic_$i.log" | head -n 16
  done
fi
if has torch; then
  echo "-- torch_compare"
  tail -n 14 "$OUT/torch_compare.log"
fi
if has random; then
  for i in $(seq 1 "$RUNS"); do
    echo "-- run $i: random fills"
    grep -E "random|cudaMemcpy" "$OUT/random_$i.log" | head -n 8
  done
  grep -E "issue_active|pipe_|dram__|inst_executed.sum" "$OUT/ncu_random.log" | awk '{print $1, $(NF)}' | sort -u
  [ -s "$OUT/sass_random_normal.txt" ] &&
    echo "random_normal<float> SASS lines: $(grep -c '/\*[0-9a-f]*\*/' "$OUT/sass_random_normal.txt")"
fi
if has host; then
  for i in $(seq 1 "$RUNS"); do
    echo "-- run $i: flowdsl_bench_host"
    grep -E "^[0-9]|caller" "$OUT/host_$i.log"
  done
fi
if has kernels; then
  echo "-- kernels_bench: % of copy"
  grep -E "%$" "$OUT/kernels.log" | awk '{print $0}' | cut -c1-90
fi
tar -C "$(dirname "$OUT")" -czf "$OUT.tar.gz" "$(basename "$OUT")"
exit $status
