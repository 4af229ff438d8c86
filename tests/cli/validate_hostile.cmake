# SPDX-License-Identifier: Apache-2.0
# `flowdsl validate` of every hostile graph file, under a 400 MB address-space limit: each refused
# with exit 1 (invalid input), except those whose refusal needs a communicator (exit 0 here;
# `flowdsl run` refuses them), and a one-node file checked within 20 MiB of resident memory:
# checking a file maps no CUDA library (cmake -P).
#   -DTOOL=<the flowdsl tool> -DFILES=<folder of hostile files> -DONE_NODE=<a valid one-node file>
cmake_minimum_required(VERSION 3.24)
set(needs_communicator nccl_comm_7 nccl_ranks_3 nccl_root_5 nccl_peer_9)
file(GLOB files ${FILES}/*.json)
if(NOT files)
  message(FATAL_ERROR "no graph files in ${FILES}")
endif()
foreach(f IN LISTS files)
  get_filename_component(name ${f} NAME_WE)
  execute_process(COMMAND sh -c "ulimit -v 400000 && exec \"$0\" validate \"$1\"" ${TOOL} ${f}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(expect 1)
  if(name IN_LIST needs_communicator)
    set(expect 0)
  endif()
  if(NOT status STREQUAL "${expect}")
    message(FATAL_ERROR "${name}: exit ${status}, expected ${expect}:\n${out}${err}")
  endif()
  if(expect EQUAL 1 AND NOT "${err}" MATCHES "/nodes/")
    message(FATAL_ERROR "${name}: the refusal names no JSON pointer:\n${err}")
  endif()
  message("${name}: exit ${status}")
endforeach()
# The one-node file: its peak resident memory, read by Python's resource module after the run.
execute_process(
  COMMAND python3 -c "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); \
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)" ${TOOL} validate ${ONE_NODE}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "validate of a one-node file: exit ${status}:\n${out}${err}")
endif()
string(REGEX MATCH "[0-9]+[ \n]*$" peak_kib "${out}")
string(STRIP "${peak_kib}" peak_kib)
if(peak_kib GREATER 20480)
  message(FATAL_ERROR "validate of a one-node file peaked at ${peak_kib} KiB resident, over 20 MiB:\n${out}")
endif()
message("one node: ${out}(peak resident KiB)")
