# SPDX-License-Identifier: Apache-2.0
# Every dependency comes from the system (Debian/Ubuntu packages and the CUDA Toolkit);
# nothing is fetched at build time.
find_package(CUDAToolkit REQUIRED)
find_package(Threads REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)

# spdlog is used header-only, with fmt header-only too, so that a binary built on Debian 12
# needs neither libspdlog.so nor libfmt.so where it runs (e.g. an Ubuntu 24.04 GPU machine).
add_library(flowdsl_spdlog INTERFACE)
find_package(fmt QUIET)
if(TARGET fmt::fmt-header-only)
  get_target_property(_spdlog_includes spdlog::spdlog_header_only INTERFACE_INCLUDE_DIRECTORIES)
  target_include_directories(flowdsl_spdlog SYSTEM INTERFACE ${_spdlog_includes})
  target_compile_definitions(flowdsl_spdlog INTERFACE SPDLOG_FMT_EXTERNAL)
  target_link_libraries(flowdsl_spdlog INTERFACE fmt::fmt-header-only Threads::Threads)
else()
  target_link_libraries(flowdsl_spdlog INTERFACE spdlog::spdlog_header_only)
endif()

if(FLOWDSL_BUILD_TESTS)
  # Catch2 v2 (Debian 12: single header catch2/catch.hpp) or v3 (Ubuntu 24.04: compiled library).
  find_package(Catch2 REQUIRED)
  if(Catch2_VERSION VERSION_GREATER_EQUAL 3)
    set(FLOWDSL_CATCH2_TARGET Catch2::Catch2)
    set(FLOWDSL_CATCH2_V3 ON)
  else()
    set(FLOWDSL_CATCH2_TARGET Catch2::Catch2)
    set(FLOWDSL_CATCH2_V3 OFF)
  endif()
endif()
