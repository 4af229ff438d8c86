#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# NCCL collectives on the GPU machine, from a build carried there (see docs/multi-gpu.md).
# One GPU: the one-rank tests, samples and bench (the plumbing). Two or more GPUs: the same under
# mpirun with one process per GPU (the gpu test with and without NCCL's graph-mixing event nodes),
# the tensor-parallel MLP at 1, 2, 4 and 8 chunks (4 and 8 tapered, 4 and 1 summed in bf16), three runs
# of the all-reduce bench and of the tensor-parallel MLP, and `flowdsl run` of
# samples/allreduce.json on every rank with its outputs checked.
# Usage: bench/nccl_device.sh <build folder> <output folder>
set -uo pipefail
build=${1:?build folder}
out=${2:?output folder}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared machines
gpus=$(nvidia-smi -L | wc -l)
echo "GPUs: $gpus" | tee "$out/summary.txt"
# NCCL for flowdsl's loader: the system's libnccl.so.2, else the one PyTorch ships.
if ! ldconfig -p | grep -q 'libnccl.so.2' && [ -z "${FLOWDSL_NCCL:-}" ]; then
  lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  [ -n "$lib" ] && [ -e "$lib" ] && export FLOWDSL_NCCL=$lib
fi
echo "FLOWDSL_NCCL=${FLOWDSL_NCCL:-<loader default>}" | tee -a "$out/summary.txt"

step() {  # step <name> <command...>: runs it, keeps its output, notes its exit code
  local name=$1; shift
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc" | tee -a "$out/summary.txt"
  tail -n 4 "$out/$name.log" | sed 's/^/    /' | tee -a "$out/summary.txt"
}

check_allreduce_outputs() {  # check_allreduce_outputs <folder> <world>
  python3 - "$1" "$2" <<'PY'
import os, sys, numpy as np
folder, world = sys.argv[1], int(sys.argv[2])
bad = 0
for r in range(world):
    base = os.path.join(folder, f"rank{r}") if world > 1 else folder
    y, z = np.load(os.path.join(base, "y.npy")), np.load(os.path.join(base, "z.npy"))
    want = np.repeat(2.0 * world - np.arange(world), 1024).astype(np.float32)
    bad += int((y != want).sum()) + int((z != want).sum())
print("allreduce.json outputs:", "correct on every rank" if bad == 0 else f"{bad} wrong elements")
sys.exit(1 if bad else 0)
PY
}

cd "$build"
step test_nccl_gpu ./tests/test_nccl_gpu
# NCCL probes kernels of other architectures with cudaFuncGetAttributes while it initialises
# (cudaErrorNoKernelImageForDevice, 40 reports in a run of the test, none from flowdsl): memcheck
# is told not to report API errors, so that what it reports is memory errors.
step memcheck_test_nccl_gpu compute-sanitizer --tool memcheck --report-api-errors no ./tests/test_nccl_gpu
step memcheck_api_errors compute-sanitizer --tool memcheck ./tests/test_nccl_gpu "[update]"
step tp_mlp_one_rank ./samples/tp_mlp
step nccl_allreduce_one_rank ./bench/nccl_allreduce --max-bytes 268435456 --json "$out/allreduce_1.json"
step flowdsl_run_one_rank ./src/flowdsl run ../samples/allreduce.json --iterations 3 --out "$out/run1"
step check_run_one_rank check_allreduce_outputs "$out/run1" 1
# The launcher's variables as Open MPI sets them (one rank: one GPU here).
step mpirun_one_rank mpirun --allow-run-as-root -np 1 -x NCCL_NVLS_ENABLE ./src/flowdsl run ../samples/allreduce.json --out "$out/run_mpi1"
step check_mpirun_one_rank check_allreduce_outputs "$out/run_mpi1" 1
if [ "$gpus" -ge 2 ]; then
  mpi=(mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE -x FLOWDSL_NCCL -x LD_LIBRARY_PATH)
  step test_nccl_gpu_2 "${mpi[@]}" ./tests/test_nccl_gpu
  # Without NCCL's event nodes (NCCL_GRAPH_MIXING_SUPPORT=0) collectives run in conditional bodies.
  step test_nccl_gpu_2_no_mixing env NCCL_GRAPH_MIXING_SUPPORT=0 "${mpi[@]}" -x NCCL_GRAPH_MIXING_SUPPORT ./tests/test_nccl_gpu
  step flowdsl_run_2 "${mpi[@]}" ./src/flowdsl run ../samples/allreduce.json --iterations 3 --out "$out/run2"
  step check_run_2 check_allreduce_outputs "$out/run2" 2
  # The tensor-parallel MLP's pipeline: how many chunks of rows at the largest bucket.
  for c in 1 2 4 8; do
    step "tp_mlp_2_chunks$c" "${mpi[@]}" ./samples/tp_mlp --rows 4096 --chunks "$c"
  done
  for c in 4 8; do
    step "tp_mlp_2_chunks${c}_taper" "${mpi[@]}" ./samples/tp_mlp --rows 4096 --chunks "$c" --taper
  done
  # The same with the partial outputs summed in bf16 (half the bytes on NVLink).
  step tp_mlp_2_chunks4_bf16 "${mpi[@]}" ./samples/tp_mlp --rows 4096 --chunks 4 --sum-bf16
  step tp_mlp_2_chunks4_taper_bf16 "${mpi[@]}" ./samples/tp_mlp --rows 4096 --chunks 4 --taper --sum-bf16
  step tp_mlp_2_chunks1_bf16 "${mpi[@]}" ./samples/tp_mlp --rows 4096 --chunks 1 --sum-bf16
  for i in 1 2 3; do
    step "nccl_allreduce_2_run$i" "${mpi[@]}" ./bench/nccl_allreduce --json "$out/allreduce_2_run$i.json"
    step "tp_mlp_2_run$i" "${mpi[@]}" ./samples/tp_mlp
  done
fi
