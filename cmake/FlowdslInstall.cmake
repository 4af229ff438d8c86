# SPDX-License-Identifier: Apache-2.0
# Install rules and the CMake package: `cmake --install build --prefix <prefix>` installs the
# public headers, the libraries, the `flowdsl` tool and <prefix>/lib/cmake/flowdsl, so that a
# consumer writes
#
#   find_package(flowdsl CONFIG REQUIRED)                 # or: COMPONENTS kernels
#   target_link_libraries(app PRIVATE flowdsl::flowdsl)   # flowdsl::kernels: the kernel library
#
# tests/package is such a consumer; the cpu test `package_consumer` installs, builds and runs it.

include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

set(FLOWDSL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/flowdsl)

# flowdsl_install(LIBRARIES <target>... [EXECUTABLES <target>...] [BUILD_ONLY <target>...])
#
# Installs LIBRARIES and EXECUTABLES into the export set flowdslTargets, exported as flowdsl::<name>
# where <name> is the target's EXPORT_NAME, or else its name without the `flowdsl_` prefix
# (flowdsl -> flowdsl::flowdsl, flowdsl_kernels -> flowdsl::kernels, flowdsl_cli -> flowdsl::cli).
# An INTERFACE umbrella library can be one of the LIBRARIES.
#
# BUILD_ONLY: this project's helper INTERFACE targets (warnings, spdlog set-up) that LIBRARIES link
# privately. A static library still lists its private links in its interface, as
# $<LINK_ONLY:helper>; these are wrapped in $<BUILD_INTERFACE:...> so that the export neither
# needs nor names them (they carry no link dependency a consumer lacks: what flowdsl_spdlog links,
# Threads, also reaches consumers through CUDA::cudart_static).
#
# Include folders in the source or build tree become $<BUILD_INTERFACE:...>, with the installed
# include folder as $<INSTALL_INTERFACE:...>. Both rewrites leave targets that already use those
# expressions as they are.
function(flowdsl_install)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "LIBRARIES;EXECUTABLES;BUILD_ONLY")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_LIBRARIES)
    message(FATAL_ERROR "flowdsl_install(LIBRARIES <target>... [EXECUTABLES <target>...] [BUILD_ONLY <target>...])")
  endif()

  foreach(target IN LISTS arg_LIBRARIES arg_EXECUTABLES)
    if(NOT TARGET ${target})
      message(FATAL_ERROR "flowdsl_install: no target '${target}'")
    endif()
    get_target_property(export_name ${target} EXPORT_NAME)
    if(NOT export_name)
      string(REGEX REPLACE "^flowdsl_" "" export_name ${target})
      set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
    endif()
  endforeach()

  foreach(target IN LISTS arg_LIBRARIES)
    _flowdsl_install_interface_includes(${target})
    _flowdsl_hide_build_only_links(${target} "${arg_BUILD_ONLY}")
  endforeach()

  install(TARGETS ${arg_LIBRARIES} ${arg_EXECUTABLES} EXPORT flowdslTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT flowdslTargets NAMESPACE flowdsl:: DESTINATION ${FLOWDSL_INSTALL_CMAKEDIR})

  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/flowdslConfig.cmake.in
    ${PROJECT_BINARY_DIR}/flowdslConfig.cmake INSTALL_DESTINATION ${FLOWDSL_INSTALL_CMAKEDIR})
  # 0.x: a new minor version may break the API.
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/flowdslConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/flowdslConfig.cmake ${PROJECT_BINARY_DIR}/flowdslConfigVersion.cmake
    DESTINATION ${FLOWDSL_INSTALL_CMAKEDIR})
endfunction()

function(_flowdsl_install_interface_includes target)
  get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT dirs)
    return()
  endif()
  set(rewritten "")
  set(in_tree OFF)
  foreach(dir IN LISTS dirs)
    cmake_path(IS_PREFIX PROJECT_SOURCE_DIR "${dir}" NORMALIZE in_source)
    cmake_path(IS_PREFIX PROJECT_BINARY_DIR "${dir}" NORMALIZE in_binary)
    if(NOT dir MATCHES "^\\$<" AND (in_source OR in_binary))
      list(APPEND rewritten "$<BUILD_INTERFACE:${dir}>")
      set(in_tree ON)
    else()
      list(APPEND rewritten "${dir}")
    endif()
  endforeach()
  if(in_tree)
    list(APPEND rewritten "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
    set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${rewritten}")
  endif()
endfunction()

function(_flowdsl_hide_build_only_links target build_only)
  get_target_property(links ${target} INTERFACE_LINK_LIBRARIES)
  if(NOT links)
    return()
  endif()
  set(rewritten "")
  foreach(link IN LISTS links)
    foreach(helper IN LISTS build_only)
      if(link STREQUAL helper OR link STREQUAL "$<LINK_ONLY:${helper}>")
        string(REPLACE "${helper}" "$<BUILD_INTERFACE:${helper}>" link "${link}")
      endif()
    endforeach()
    list(APPEND rewritten "${link}")
  endforeach()
  set_target_properties(${target} PROPERTIES INTERFACE_LINK_LIBRARIES "${rewritten}")
endfunction()
