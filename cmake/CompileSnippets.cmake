# SPDX-License-Identifier: Apache-2.0
# Compiles (syntax only: nothing is linked or run, no GPU needed) every snippet that
# ExtractSnippets.cmake extracted from one doc; reports every failure, then fails once (cmake -P).
#
#   cmake -DSNIPPETS=<dir>/snippets.txt -DCXX=<c++ compiler> [-DNVCC=<nvcc>]
#         -DINCLUDES=<dir>|<dir>... [-DDEFINES=<name[=value]>|...] -P CompileSnippets.cmake
#
# .cpp: CXX -std=c++17 -fsyntax-only. .cu (a __global__ function): nvcc -cuda -fdevice-syntax-only
# (nvcc's front end checks host and device code; no host compiler, no device code generated).
# Without nvcc, .cu snippets are reported as not compiled.

cmake_minimum_required(VERSION 3.24)

foreach(var SNIPPETS CXX INCLUDES)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "CompileSnippets.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT EXISTS "${SNIPPETS}")
  message(FATAL_ERROR "${SNIPPETS} is missing: build first (target flowdsl_doc_snippets)")
endif()

string(REPLACE "|" ";" _includes "${INCLUDES}")
list(REMOVE_DUPLICATES _includes)
string(REPLACE "|" ";" _defines "${DEFINES}")
set(_flags "")
foreach(dir IN LISTS _includes)
  list(APPEND _flags "-I${dir}")
endforeach()
foreach(define IN LISTS _defines)
  list(APPEND _flags "-D${define}")
endforeach()

file(STRINGS "${SNIPPETS}" _files)
set(_compiled 0)
set(_failed "")
set(_skipped "")
foreach(file IN LISTS _files)
  if(file MATCHES "\\.cu$")
    if(NOT NVCC OR NOT EXISTS "${NVCC}")
      list(APPEND _skipped "${file}")
      continue()
    endif()
    set(command "${NVCC}" -x cu -std=c++17 -cuda -fdevice-syntax-only -o /dev/null ${_flags} "${file}")
  else()
    set(command "${CXX}" -x c++ -std=c++17 -fsyntax-only ${_flags} "${file}")
  endif()
  execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  math(EXPR _compiled "${_compiled} + 1")
  if(NOT rc EQUAL 0)
    list(APPEND _failed "${file}")
    message("-- ${file} does not compile:\n${out}")
  endif()
endforeach()

list(LENGTH _failed _failures)
math(EXPR _passed "${_compiled} - ${_failures}")
message("${_compiled} snippets compiled: ${_passed} passed, ${_failures} failed")
foreach(file IN LISTS _skipped)
  message("not compiled (no nvcc): ${file}")
endforeach()
if(_failures GREATER 0)
  message(FATAL_ERROR "${_failures} snippets do not compile (errors above name the Markdown lines)")
endif()
