# Runs attn-calc on bad input and checks how it refuses: exit code 2, nothing on stdout, and
# exactly one line on stderr that starts "attn-calc: " and contains EXPECT.
#   cmake -DCALC=<attn-calc> -DARGS=<arg|arg|...> -DEXPECT=<text> -P bad_input.cmake
# ARGS are separated by '|'.
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND "${CALC}" ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
set(problems "")
if(NOT rc STREQUAL "2")
  string(APPEND problems "  exit code ${rc}, expected 2\n")
endif()
if(NOT out STREQUAL "")
  string(APPEND problems "  stdout is not empty:\n${out}\n")
endif()
if(NOT err MATCHES "^attn-calc: [^\n]+\n$")
  string(APPEND problems "  stderr is not one line starting \"attn-calc: \":\n${err}\n")
endif()
string(FIND "${err}" "${EXPECT}" at)
if(at EQUAL -1)
  string(APPEND problems "  stderr does not say \"${EXPECT}\"\n")
endif()
if(problems)
  message(FATAL_ERROR "attn-calc ${ARGS}\n${problems}")
endif()
