# cmake -DSOURCE_DIR=... -DWORK_DIR=... -DCXX=... -DNINJA=... -P quick_start_builds.cmake
# What the README's two quick-start lines build, read from the commands of `all` (ninja -t
# commands) after configuring each preset in a scratch directory: line 1 (preset default) links
# attn-calc and the examples and nothing else, without looking for Catch2; line 2 (preset test)
# links all of that and the unit tests.
cmake_minimum_required(VERSION 3.25)  # the policies of the project (if(IN_LIST))
function(linked_by preset out)
  set(build "${WORK_DIR}/${preset}")
  file(REMOVE_RECURSE "${build}")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" --preset ${preset} -B "${build}" "-DCMAKE_CXX_COMPILER=${CXX}"
    WORKING_DIRECTORY "${SOURCE_DIR}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cmake --preset ${preset} failed:\n${log}")
  endif()
  execute_process(COMMAND "${NINJA}" -C "${build}" -t commands all
    RESULT_VARIABLE rc OUTPUT_VARIABLE commands ERROR_VARIABLE commands)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ninja -t commands all failed for preset ${preset}:\n${commands}")
  endif()
  # Every output that is not an object file: the programs.
  string(REGEX MATCHALL " -o [^ \n]+" outputs "${commands}")
  list(TRANSFORM outputs REPLACE "^ -o " "")
  set(links)
  foreach(output IN LISTS outputs)
    if(NOT output MATCHES "\\.(o|obj)$")
      list(APPEND links "${output}")
    endif()
  endforeach()
  list(SORT links)
  set(${out} "${links}" PARENT_SCOPE)
  set(${out}_log "${log}" PARENT_SCOPE)
  file(REMOVE_RECURSE "${build}")
endfunction()

linked_by(default line_1)
# The programs line 1 must link: attn-calc and one per examples/*.cpp (each example is one
# file), so a new example needs no edit here.
file(GLOB example_sources RELATIVE "${SOURCE_DIR}/examples" "${SOURCE_DIR}/examples/*.cpp")
set(expected examples/attn-calc)
foreach(source IN LISTS example_sources)
  string(REGEX REPLACE "\\.cpp$" "" name "${source}")
  list(APPEND expected "examples/${name}")
endforeach()
list(SORT expected)
if(NOT line_1 STREQUAL expected)
  list(JOIN expected " " expected)
  list(JOIN line_1 " " line_1)
  message(FATAL_ERROR "cmake --workflow --preset default must build attn-calc and the examples "
                      "only:\n  expected: ${expected}\n  builds:   ${line_1}")
endif()
if(line_1_log MATCHES "Catch2")
  message(FATAL_ERROR "cmake --preset default must not look for Catch2:\n${line_1_log}")
endif()

linked_by(test line_2)
foreach(program IN LISTS expected)
  if(NOT program IN_LIST line_2)
    message(FATAL_ERROR "cmake --workflow --preset test must build ${program} too; it builds ${line_2}")
  endif()
endforeach()
if(NOT "tests/attn_tests" IN_LIST line_2 AND NOT line_2_log MATCHES "Catch2 \\(v3, or v2.13\\) was not found")
  message(FATAL_ERROR "cmake --workflow --preset test must build the unit tests; it builds ${line_2}")
endif()
