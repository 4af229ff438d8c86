#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One device call for the memory-bound kernel work: checks the changed
# kernels against their host references, times every kernel at 1 GiB operands, and reads
# Nsight Compute's unit utilisation for the two arithmetic-heavy kernels.
#
#   bash bench/kernels_device.sh            (from the repository root, on the H200)
#
# Uses build/tests/test_kernels and build/bench/kernels_bench when they are there (built on
# the development machine and carried), else configures and builds them in build-device/.
# Writes everything under $OUT (default ./device-out) and prints a short table last.
set -u
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

tests=build/tests/test_kernels
bench=build/bench/kernels_bench
# Catch2's --list-tests exits with the number of tests listed: only the bench's usage line tells
# whether the carried binaries load here.
if [ ! -x "$tests" ] || ! "$bench" --help 2>&1 | grep -q usage; then
  if [ -x "$tests" ] && [ -x "$bench" ]; then log "carried binaries do not run here; building"; fi
  cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
    cmake --build build-device --target test_kernels kernels_bench >> "$OUT/build.log" 2>&1 ||
    { log "build failed (tail of $OUT/build.log):"; tail -30 "$OUT/build.log"; exit 1; }
  tests=build-device/tests/test_kernels
  bench=build-device/bench/kernels_bench
fi
log "binaries: $tests, $bench"

# SASS of the changed kernels: 16-byte accesses where intended, no local memory.
if command -v cuobjdump > /dev/null; then
  cuobjdump --dump-sass "$bench" > "$OUT/kernels_bench.sass" 2>&1
  for k in bias_activation_kernel layer_norm_kernelILi256E crop_kernel heat2d_step_kernel cartpole_step_kernel \
           random_normal_kernel; do
    awk -v k="$k" '/Function : /{f = index($0, k) > 0} f' "$OUT/kernels_bench.sass" > "$OUT/sass_$k.txt"
    printf '%-32s LDG.128 %3d  STG.128 %3d  LDL/STL %3d\n' "$k" "$(grep -c 'LDG.E.128' "$OUT/sass_$k.txt")" \
      "$(grep -c 'STG.E.128' "$OUT/sass_$k.txt")" "$(grep -cE 'LDL|STL' "$OUT/sass_$k.txt")" | tee -a "$OUT/summary.txt"
  done
fi

# 1. Correctness of the changed kernels (random inputs, poisoned outputs, odd shapes).
"$tests" "[elementwise],[random],[layer_norm],[batching],[heat2d],[cartpole]" --durations no > "$OUT/test_kernels.log" 2>&1
tests_rc=$?
log "test_kernels (changed kernels): exit $tests_rc; $(grep -E 'test cases|All tests passed' "$OUT/test_kernels.log" | tail -1)"

# 2. The full bench: 1 GiB operands, median of 20, against the copy in the same run.
"$bench" --json "$OUT/kernels.json" > "$OUT/kernels_bench.log" 2>&1
log "kernels_bench: exit $?"

# 3. Nsight Compute on the arithmetic-heavy kernels at 64 MiB (--quick), clocks as found.
ncu_sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
              --section Occupancy --section LaunchStats)
pipes=sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
pipes=$pipes,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active
pipes=$pipes,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active
pipes=$pipes,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
for k in random_normal cartpole_step; do
  case $k in
    random_normal) only="random_normal" ;;
    cartpole_step) only="cartpole" ;;
  esac
  ncu --clock-control none "${ncu_sections[@]}" -k "regex:${k}_kernel" --launch-skip 3 --launch-count 1 \
    "$bench" --quick --repeats 1 --only "$only" > "$OUT/ncu_$k.txt" 2>&1
  log "ncu $k: exit $?"
  # Pipe utilisation by name, apart, so that a metric this ncu lacks costs only this run.
  ncu --clock-control none --metrics "$pipes" -k "regex:${k}_kernel" --launch-skip 3 --launch-count 1 \
    "$bench" --quick --repeats 1 --only "$only" > "$OUT/ncu_pipes_$k.txt" 2>&1
  log "ncu pipes $k: exit $?"
done

# Short table last (the reply carries the end of the output).
echo
echo "kernel                                      GB/s   % of copy   (goal >= 80)"
python3 - "$OUT/kernels.json" << 'EOF' 2> /dev/null || grep -E "%$" "$OUT/kernels_bench.log"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
watch = ("bias+silu", "random_normal", "layer_norm bf16", "crop", "heat2d", "cartpole", "random_uniform", "cudaMemcpy")
for r in rows:
    if r["bytes"] > 0 and any(w in r["name"] for w in watch):
        print(f'{r["name"]:<42} {r["gb_per_s"]:6.0f}   {r["percent_of_baseline"]:6.1f}')
EOF
echo
for k in random_normal cartpole_step; do
  echo "ncu $k:"
  grep -E "Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Issue Slots Busy|Executed Ipc Active|SM Busy|Achieved Occupancy|Duration" \
    "$OUT/ncu_$k.txt" | sed 's/^ */  /'
  grep -E "pipe_|issue_active|dram__|sm__throughput" "$OUT/ncu_pipes_$k.txt" | sed 's/^ */  /'
done
cat "$OUT/summary.txt" | grep -E "test_kernels|build failed"
