# SPDX-License-Identifier: Apache-2.0
# flowdsl_layer(<name> SOURCES ... [LINKS ...] [PRIVATE_LINKS ...]): the static library
# flowdsl_<name> of one layer of src/CMakeLists.txt. Its sources see the public headers, the
# internal headers of their own folder (src/<name>) and of src/ (for "lower/emit.hpp" style
# includes of earlier layers), and nothing else; the layering check runs before they compile.
file(GLOB_RECURSE _flowdsl_layer_inputs CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/src/*.cpp ${PROJECT_SOURCE_DIR}/src/*.hpp ${PROJECT_SOURCE_DIR}/include/flowdsl/*.hpp)
add_custom_command(
  OUTPUT ${CMAKE_BINARY_DIR}/flowdsl_layers.stamp
  COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -P ${PROJECT_SOURCE_DIR}/cmake/CheckLayers.cmake
  COMMAND ${CMAKE_COMMAND} -E touch ${CMAKE_BINARY_DIR}/flowdsl_layers.stamp
  DEPENDS ${PROJECT_SOURCE_DIR}/cmake/CheckLayers.cmake ${_flowdsl_layer_inputs}
  COMMENT "Checking that includes follow the layers (base <- builder <- lower <- runtime <- profiler <- io)")
add_custom_target(flowdsl_layers DEPENDS ${CMAKE_BINARY_DIR}/flowdsl_layers.stamp)

function(flowdsl_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "SOURCES;LINKS;PRIVATE_LINKS")
  set(target flowdsl_${name})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(flowdsl::${name} ALIAS ${target})
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/${name} ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${target} PUBLIC ${ARG_LINKS} PRIVATE ${ARG_PRIVATE_LINKS} flowdsl_warnings)
  target_compile_definitions(${target} PRIVATE SPDLOG_ACTIVE_LEVEL=SPDLOG_LEVEL_DEBUG)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON EXPORT_NAME ${name})
  add_dependencies(${target} flowdsl_layers)
endfunction()
