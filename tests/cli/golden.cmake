# Runs a command and compares a file it produced with a golden file, byte for byte.
#   cmake -DRUN=<program|arg|...> -DOUT=<file> [-DCAPTURE=ON] -DGOLDEN=<file> -P golden.cmake
# RUN's arguments are separated by '|'. With CAPTURE=ON the command's stdout is written to OUT;
# otherwise the command writes OUT itself. With the environment variable ATTN_UPDATE_GOLDEN=1
# the golden file is replaced by OUT instead (to accept an intended change: review the diff).
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" run "${RUN}")
file(REMOVE "${OUT}")
if(CAPTURE)
  execute_process(COMMAND ${run} OUTPUT_FILE "${OUT}" ERROR_VARIABLE err RESULT_VARIABLE rc)
else()
  execute_process(COMMAND ${run} OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${RUN} exited with ${rc}:\n${err}")
endif()
if(NOT EXISTS "${OUT}")
  message(FATAL_ERROR "${RUN} did not write ${OUT}")
endif()
if("$ENV{ATTN_UPDATE_GOLDEN}" STREQUAL "1")
  file(COPY_FILE "${OUT}" "${GOLDEN}")
  message(STATUS "updated ${GOLDEN}")
  return()
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${OUT}" "${GOLDEN}" RESULT_VARIABLE differ)
if(differ)
  message(FATAL_ERROR "${OUT} differs from ${GOLDEN}.\n"
                      "See: diff ${GOLDEN} ${OUT}\n"
                      "If the change is intended: ATTN_UPDATE_GOLDEN=1 ctest -R attn_calc_golden")
endif()
