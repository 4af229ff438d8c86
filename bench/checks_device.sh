#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One device call that checks what a hostile graph file, a bad Python size and a racing bench
# setup must not do, on the GPU machine, from a build carried there (build/, configured with
# -DFLOWDSL_PYTHON=ON for the Python 3.12 there):
#
#   bash bench/checks_device.sh            (from the repository root, on the GPU machine)
#
# Steps: every gpu test (ctest -L gpu); the Python tests; bench/programmatic_bench 50 times (each
# run verifies its results); `flowdsl run` of every file in tests/data/hostile plus a cuBLASLt node
# set whose workspaces cannot be allocated (none may exit 3, "internal error"); the cuBLASLt and
# condition and decoder kernels' gpu tests under compute-sanitizer memcheck (racecheck, decoder:
# the decoder kernels alone, and under racecheck). Writes under $OUT (default
# ./device-out) a log per step and summary.txt, one line per step.
set -u
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
export NCCL_NVLS_ENABLE=0
# ctest's files name the build by the path it was configured at.
configured=$(sed -n 's/^# Build directory: //p' build/CTestTestfile.cmake)
if [ -n "$configured" ] && [ "$configured" != "$PWD/build" ] && [ ! -e "$configured" ]; then
  mkdir -p "$(dirname "$(dirname "$configured")")" && ln -s "$PWD" "$(dirname "$configured")"
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
log "device: $(cat "$OUT/gpu.txt")"

steps=${STEPS:-"ctest python programmatic hostile memcheck"}
for step in $steps; do
  case $step in
    ctest)
      (cd build && timeout "${CTEST_TIMEOUT:-400}" ctest -L gpu -j 4 --output-on-failure > "$OUT/ctest_gpu.log" 2>&1)
      log "ctest -L gpu: exit $?; $(grep -E 'tests passed|tests failed' "$OUT/ctest_gpu.log" | tail -1)"
      ;;
    python)
      PYTHONPATH=build/python python3 -m pytest python/tests -q -rs > "$OUT/pytest.log" 2>&1
      log "pytest: exit $?; $(tail -1 "$OUT/pytest.log")"
      ;;
    programmatic)
      wrong=0 failed=0
      for i in $(seq 1 50); do
        build/bench/programmatic_bench --quick > "$OUT/programmatic_run.log" 2>&1 || failed=$((failed + 1))
        grep -q "RESULTS WRONG" "$OUT/programmatic_run.log" && { wrong=$((wrong + 1)); cat "$OUT/programmatic_run.log" >> "$OUT/programmatic_wrong.log"; }
        grep -q "results verified" "$OUT/programmatic_run.log" || true
      done
      log "programmatic_bench --quick x50: $((50 - wrong)) of 50 verified, $wrong wrong, $failed nonzero exits"
      ;;
    memcheck_library)
      compute-sanitizer --tool memcheck --report-api-errors no build/tests/test_library_gpu > "$OUT/memcheck_library.log" 2>&1
      log "memcheck test_library_gpu: exit $?; $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_library.log" | tail -1)"
      ;;
    hostile)
      # 5 000 products, each with an output of its own: 5 000 workspaces of 32 MiB, beyond the card.
      python3 - > "$OUT/workspaces.json" <<'EOF'
import json
n = 5000
print(json.dumps({"version": 1, "name": "workspaces",
  "buffers": [{"name": "a", "type": "bf16", "count": 64}, {"name": "b", "type": "bf16", "count": 64},
              {"name": "out", "type": "bf16", "count": 64 * n}],
  "nodes": [{"name": "mm%d" % j, "kind": "library", "call": "cublaslt.matmul.bf16",
             "args": {"m": 8, "n": 8, "k": 8, "a": "a", "b": "b", "bias": "a", "epilogue": "none",
                      "c": {"buffer": "out", "offset": 128 * j}}} for j in range(n)]}))
EOF
      threes=0
      for f in tests/data/hostile/*.json "$OUT/workspaces.json"; do
        timeout 120 build/src/flowdsl run "$f" > "$OUT/hostile_run.log" 2>&1
        status=$?
        echo "$(basename "$f"): exit $status: $(head -c 300 "$OUT/hostile_run.log" | tr '\n' ' ')" >> "$OUT/hostile.log"
        [ "$status" -eq 3 ] && threes=$((threes + 1))
      done
      log "flowdsl run of $(ls tests/data/hostile/*.json | wc -l) hostile files + workspaces: $threes exited 3 (see hostile.log)"
      ;;
    memcheck)
      compute-sanitizer --tool memcheck --report-api-errors no build/tests/test_kernels "[condition],[decoder]" \
        > "$OUT/memcheck_kernels.log" 2>&1
      log "memcheck test_kernels [condition],[decoder]: exit $?; $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_kernels.log" | tail -1)"
      ;;
    racecheck)
      compute-sanitizer --tool racecheck build/tests/test_kernels "[decoder]" > "$OUT/racecheck_decoder.log" 2>&1
      log "racecheck test_kernels [decoder]: exit $?; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/racecheck_decoder.log" | tail -1)"
      ;;
    decoder)
      build/tests/test_kernels "[decoder]" > "$OUT/decoder.log" 2>&1
      log "test_kernels [decoder]: exit $?; $(grep -E 'test cases|All tests passed' "$OUT/decoder.log" | tail -1)"
      ;;
  esac
done
