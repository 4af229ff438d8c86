# The installed package, end to end (cmake -P; the cpu test package_consumer): installs a built
# flowdsl into a scratch prefix, configures tests/package against it with find_package, builds
# it and runs it, and runs the installed `flowdsl` tool when there is one.
#
#   cmake -DBUILD_DIR=<flowdsl build> -DWORK_DIR=<scratch> -DSOURCE_DIR=<tests/package>
#         -DGENERATOR=<generator> -DCXX=<c++ compiler> -DCONFIG=<build type>
#         [-DCUDA_ROOT=<toolkit>] [-DFLAGS=<compile and link flags>] -P consume.cmake

cmake_minimum_required(VERSION 3.24)

foreach(var BUILD_DIR WORK_DIR SOURCE_DIR GENERATOR CXX CONFIG)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "consume.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(consumer ${WORK_DIR}/consumer)

# Runs one step; on failure prints its output and stops with `what`.
function(step what)
  string(REPLACE ";" " " shown "${ARGN}")
  message("-- ${what}: ${shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})

step("install (needs the whole build: cmake --build first)"
  ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --config ${CONFIG})

set(configure_args -S ${SOURCE_DIR} -B ${consumer} -G ${GENERATOR}
  -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
  -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=${CONFIG})
if(CUDA_ROOT)
  list(APPEND configure_args -DCUDAToolkit_ROOT=${CUDA_ROOT})
endif()
if(FLAGS)
  list(APPEND configure_args "-DCMAKE_CXX_FLAGS=${FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${FLAGS}")
endif()
step("configure the consumer" ${CMAKE_COMMAND} ${configure_args})

# The package must be the one just installed, not one found elsewhere.
file(STRINGS ${consumer}/CMakeCache.txt found REGEX "^flowdsl_DIR:")
string(REGEX REPLACE "^flowdsl_DIR:[A-Z]+=" "" found "${found}")
cmake_path(IS_PREFIX prefix "${found}" NORMALIZE from_prefix)
if(NOT from_prefix)
  message(FATAL_ERROR "find_package(flowdsl) found '${found}', not the package installed in ${prefix}")
endif()

step("build the consumer" ${CMAKE_COMMAND} --build ${consumer} --config ${CONFIG})

step("run the consumer" ${consumer}/app)
message("${step_output}")
if(NOT step_output MATCHES "valid graph of 2 nodes, topology [0-9a-f]+")
  message(FATAL_ERROR "the consumer did not print its topology hash")
endif()

if(EXISTS ${prefix}/bin/flowdsl)
  step("run the installed tool" ${prefix}/bin/flowdsl info)
endif()
message("-- the installed package builds and runs")
