#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One device call for fusion: its gpu tests, the preprocess sample (graph, stream, fused graph),
# the CLI's --fuse runs (a second process reading the kernel a first one compiled into a cache
# directory) and profile, the Python fusion tests, three runs of bench/fusion_bench.py (10- and
# 30-step chains against the unfused graph and torch.compile), then the gpu tests under
# compute-sanitizer memcheck. Usage: bench/fusion_device.sh (from a built tree; PYTHONPATH must
# reach the flowdsl package, e.g. build/python); FUSION_BENCH=0 skips the bench runs; logs go
# to $OUT (default /tmp/fusion_device).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/fusion_device}
mkdir -p "$out"
log="$out/fusion_device.log"
status=0
run() {  # a step (at most 200 s), its output to the log, its last lines to the terminal
  echo "== $*" | tee -a "$log"
  timeout 200 "$@" >>"$log" 2>&1 || { echo "   FAILED ($?)" | tee -a "$log"; status=1; }
  tail -n 4 "$log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee -a "$log"
run build/tests/test_fusion_gpu
run build/samples/preprocess
cache=$(mktemp -d)
run env FLOWDSL_FUSION_CACHE="$cache" build/src/flowdsl run samples/preprocess.json --fuse --iterations 3
run env FLOWDSL_FUSION_CACHE="$cache" build/src/flowdsl run samples/preprocess.json --fuse --iterations 3
run build/src/flowdsl profile samples/preprocess.json --fuse --iterations 5
run python3 -m pytest python/tests -q -k "fuse or fusion"
if [ "${FUSION_BENCH:-1}" = 1 ]; then
  for i in 1 2 3; do run python3 bench/fusion_bench.py --json "$out/fusion_bench_$i.json"; done
fi
run compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/test_fusion_gpu
exit $status
