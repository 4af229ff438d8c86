#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One device call that records every GPU test result and the figures of the main benches, to
# compare two builds of the library (a refactoring must leave both unchanged):
#
#   bash bench/regression_device.sh            (from the repository root, on the H200, with build/)
#   python3 bench/compare_figures.py A/flowdsl_bench.json B/flowdsl_bench.json   (afterwards)
#
# Writes under $OUT (default ./device-out): ctest's log, flowdsl_bench.json, kernels.json, and
# summary.txt with one line per step.
set -u
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
export NCCL_NVLS_ENABLE=0

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1

(cd build && ctest -L gpu --output-on-failure > "$OUT/ctest_gpu.log" 2>&1)
log "ctest -L gpu: exit $?; $(grep -E 'tests passed|tests failed' "$OUT/ctest_gpu.log" | tail -1)"

build/bench/flowdsl_bench --json "$OUT/flowdsl_bench.json" > "$OUT/flowdsl_bench.log" 2>&1
log "flowdsl_bench: exit $?"
build/bench/kernels_bench --json "$OUT/kernels.json" > "$OUT/kernels_bench.log" 2>&1
log "kernels_bench: exit $?"
