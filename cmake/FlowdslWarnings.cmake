# SPDX-License-Identifier: Apache-2.0
# Warnings applied to flowdsl's own targets (not to the dependencies' headers).
add_library(flowdsl_warnings INTERFACE)
target_compile_options(flowdsl_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
# FLOWDSL_WERROR (CI's builds): every warning of the project's own code is an error, from g++ and
# from nvcc alike.
if(FLOWDSL_WERROR)
  target_compile_options(flowdsl_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
endif()
