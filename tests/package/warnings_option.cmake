# cmake -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -DCXX=... -P warnings_option.cmake
# ATTN_WARNINGS_AS_ERRORS is honoured: configures the source tree with the examples only, once
# by default and once with the option on, and reads attn-calc's compile command from each
# compile_commands.json: our warnings both times, -Werror (/WX) only when asked for.
function(attn_calc_command out)
  set(build "${WORK_DIR}/${out}")
  file(REMOVE_RECURSE "${build}")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
            "-DCMAKE_CXX_COMPILER=${CXX}" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
            -DATTN_BUILD_TESTS=OFF -DATTN_BUILD_EXAMPLES=ON -DATTN_INSTALL=OFF ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configuring ${SOURCE_DIR} ${ARGN} failed:\n${log}")
  endif()
  if(NOT EXISTS "${build}/compile_commands.json")
    message(STATUS "SKIPPED: the generator ${GENERATOR} writes no compile_commands.json")
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  file(READ "${build}/compile_commands.json" commands)
  string(REGEX MATCH "\"command\": \"[^\n]*attn_calc/main\\.cpp[^\n]*" command "${commands}")
  if(NOT command)
    message(FATAL_ERROR "no compile command for examples/attn_calc/main.cpp in ${build}")
  endif()
  set(${out} "${command}" PARENT_SCOPE)
  file(REMOVE_RECURSE "${build}")
endfunction()

attn_calc_command(by_default)
if(NOT by_default)
  return()
endif()
attn_calc_command(asked -DATTN_WARNINGS_AS_ERRORS=ON)

set(warning_flag "(^| )(-Wall|/W4)( |$)")
set(error_flag "(^| )(-Werror|/WX)( |$)")
if(NOT by_default MATCHES "${warning_flag}" OR NOT asked MATCHES "${warning_flag}")
  message(FATAL_ERROR "attn-calc must build with our warnings in both builds:\n"
                      "  by default: ${by_default}\n  with ATTN_WARNINGS_AS_ERRORS=ON: ${asked}")
endif()
if(by_default MATCHES "${error_flag}")
  message(FATAL_ERROR "a plain configure must not turn warnings into errors:\n  ${by_default}")
endif()
if(NOT asked MATCHES "${error_flag}")
  message(FATAL_ERROR "ATTN_WARNINGS_AS_ERRORS=ON must add -Werror (/WX):\n  ${asked}")
endif()
