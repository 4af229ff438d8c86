# SPDX-License-Identifier: Apache-2.0
# Extracts the C++ blocks of one Markdown file into files that a test compiles (cmake -P).
#
#   cmake -DDOC=<file.md> -DNAME=<name> -DOUTPUT_DIR=<dir> -P ExtractSnippets.cmake
#
# Every ```cpp block becomes <OUTPUT_DIR>/<NAME>_<index>.cpp (index counts the doc's C++
# blocks from 1), or .cu when it declares a __global__ function; <OUTPUT_DIR>/snippets.txt lists
# them. A #line directive points each one at its Markdown line, so compile errors name the doc.
#
# The line before a fence may say how to compile the block (an HTML comment: not rendered):
#   (nothing)                    the block is a complete translation unit
#   <!-- snippet: fragment -->   statements: leading #include lines stay at file scope, the rest
#                                becomes a function body, after tests/docs/snippet_context.hpp
#                                (the headers and the names a reader may assume)
#   <!-- snippet: skip -->       not compiled (pseudo-code only; use sparingly)
# The rule for contributors is in docs/contributing.md ("Documentation snippets").

cmake_minimum_required(VERSION 3.24)

foreach(var DOC NAME OUTPUT_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "ExtractSnippets.cmake: -D${var}=... is required")
  endif()
endforeach()

# Split into lines without CMake's list syntax getting in the way: ';', '[' and ']' are swapped
# for control characters here and swapped back when a line is written.
string(ASCII 1 _semicolon)
string(ASCII 2 _open_bracket)
string(ASCII 3 _close_bracket)
file(READ "${DOC}" _text)
string(REPLACE ";" "${_semicolon}" _text "${_text}")
string(REPLACE "[" "${_open_bracket}" _text "${_text}")
string(REPLACE "]" "${_close_bracket}" _text "${_text}")
string(REPLACE "\r" "" _text "${_text}")
string(REPLACE "\n" ";" _lines "${_text}")

function(_restore out line)
  string(REPLACE "${_semicolon}" ";" line "${line}")
  string(REPLACE "${_open_bracket}" "[" line "${line}")
  string(REPLACE "${_close_bracket}" "]" line "${line}")
  set(${out} "${line}" PARENT_SCOPE)
endfunction()

# Writes one extracted block: the lines in the list named LINES_VAR (passed by name: an expanded
# list would lose its blank lines), the first of which is line BODY_LINE of the doc.
function(_write_snippet index mode body_line lines_var)
  set(lines "${${lines_var}}")
  set(extension cpp)
  foreach(line IN LISTS lines)
    if(line MATCHES "^([^/]|/[^/])*__global__")  # not in a // comment
      set(extension cu)
    endif()
  endforeach()
  set(file "${OUTPUT_DIR}/${NAME}_${index}.${extension}")
  set(text "// C++ block ${index} of ${DOC}, extracted by cmake/ExtractSnippets.cmake: edit the doc, not this file.\n")
  if(mode STREQUAL "fragment")
    string(APPEND text "#include \"snippet_context.hpp\"\n")
    list(GET lines 0 first)
    if(first MATCHES "^[ \t]*#[ \t]*include")
      string(APPEND text "#line ${body_line} \"${DOC}\"\n")
    endif()
    # Leading #include lines (and blank lines) stay at file scope.
    set(in_body OFF)
    set(line_number ${body_line})
    foreach(line IN LISTS lines)
      if(NOT in_body AND NOT line MATCHES "^[ \t]*(#[ \t]*include.*)?$")
        set(in_body ON)
        string(APPEND text "void snippet_${NAME}_${index}() {\n#line ${line_number} \"${DOC}\"\n")
      endif()
      _restore(line "${line}")
      string(APPEND text "${line}\n")
      math(EXPR line_number "${line_number} + 1")
    endforeach()
    if(NOT in_body)
      message(FATAL_ERROR "${DOC}:${body_line}: a fragment with nothing but #include lines")
    endif()
    string(APPEND text "}\n")
  else()
    string(APPEND text "#line ${body_line} \"${DOC}\"\n")
    foreach(line IN LISTS lines)
      _restore(line "${line}")
      string(APPEND text "${line}\n")
    endforeach()
  endif()
  file(WRITE "${file}" "${text}")
  set_property(GLOBAL APPEND PROPERTY _snippet_files "${file}")
endfunction()

file(REMOVE_RECURSE "${OUTPUT_DIR}")
file(MAKE_DIRECTORY "${OUTPUT_DIR}")
set_property(GLOBAL PROPERTY _snippet_files "")

set(_line_number 0)
set(_in_block OFF)       # inside any fenced block
set(_collecting OFF)     # inside a C++ block that is compiled
set(_index 0)
set(_marker "")          # the snippet comment on the last non-blank line, if any
set(_marker_line 0)
foreach(_line IN LISTS _lines)
  math(EXPR _line_number "${_line_number} + 1")
  if(_in_block)
    if(_line MATCHES "^[ \t]*```[ \t]*$")
      set(_in_block OFF)
      if(_collecting)
        _write_snippet(${_index} "${_mode}" ${_body_line} _body)
        set(_collecting OFF)
      endif()
    elseif(_collecting)
      # Drop the fence's indentation (a block inside a list item).
      string(LENGTH "${_indent}" _indent_length)
      string(SUBSTRING "${_line}" 0 ${_indent_length} _prefix)
      if(_prefix STREQUAL _indent)
        string(SUBSTRING "${_line}" ${_indent_length} -1 _line)
      endif()
      list(APPEND _body "${_line}")
    endif()
    continue()
  endif()

  if(_line MATCHES "^([ \t]*)```[ \t]*([^ \t]*)")
    set(_in_block ON)
    set(_indent "${CMAKE_MATCH_1}")
    set(_language "${CMAKE_MATCH_2}")
    if(_language MATCHES "^(cpp|c\\+\\+|cuda)$")
      math(EXPR _index "${_index} + 1")
      if(_marker STREQUAL "skip")
        message(STATUS "${DOC}:${_line_number}: C++ block ${_index} is marked skip: not compiled")
      else()
        set(_collecting ON)
        set(_mode "${_marker}")
        math(EXPR _body_line "${_line_number} + 1")
        set(_body "")
      endif()
    elseif(NOT _marker STREQUAL "")
      message(FATAL_ERROR "${DOC}:${_marker_line}: '<!-- snippet: ${_marker} -->' must come right before a ```cpp block")
    endif()
    set(_marker "")
  elseif(_line MATCHES "^[ \t]*<!--[ \t]*snippet:[ \t]*([^ \t]*)[ \t]*-->[ \t]*$")
    set(_marker "${CMAKE_MATCH_1}")
    if(NOT _marker MATCHES "^(fragment|skip)$")
      message(FATAL_ERROR "${DOC}:${_line_number}: unknown snippet mode '${_marker}' (fragment or skip)")
    endif()
    set(_marker_line ${_line_number})
  elseif(NOT _line MATCHES "^[ \t]*$" AND NOT _marker STREQUAL "")
    message(FATAL_ERROR "${DOC}:${_marker_line}: '<!-- snippet: ${_marker} -->' must come right before a ```cpp block")
  endif()
endforeach()
if(_in_block)
  message(FATAL_ERROR "${DOC}: a fenced block is not closed")
endif()

get_property(_files GLOBAL PROPERTY _snippet_files)
list(JOIN _files "\n" _files)
file(WRITE "${OUTPUT_DIR}/snippets.txt" "${_files}\n")
