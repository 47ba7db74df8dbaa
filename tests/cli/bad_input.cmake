# Runs attn-calc on bad input and checks how it refuses: exit code 2, nothing on stdout, and
# exactly one line on stderr that starts "attn-calc: " and contains EXPECT, with no control
# character (no NUL, no escape sequence) before its line feed.
#   cmake -DCALC=<attn-calc> -DARGS=<arg|arg|...> -DEXPECT=<text> -P bad_input.cmake
# ARGS are separated by '|'; "<semicolon>" in them stands for ';' (which CMake's lists would split at).
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" args "${ARGS}")
string(REPLACE "<semicolon>" "\\;" args "${args}")
# stderr goes through a file, read back as bytes: a NUL or an escape sequence in it is a failure
string(MD5 run_id "${ARGS}")
set(err_file "${CMAKE_CURRENT_BINARY_DIR}/attn_calc_stderr_${run_id}.txt")
execute_process(COMMAND "${CALC}" ${args} OUTPUT_VARIABLE out ERROR_FILE "${err_file}" RESULT_VARIABLE rc)
file(READ "${err_file}" err_hex HEX)
file(READ "${err_file}" err)
file(REMOVE "${err_file}")
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
# every byte before the final line feed is printable: none below 0x20, no DEL
if(NOT err_hex MATCHES "^([2-6][0-9a-f]|7[0-9a-e]|[89a-f][0-9a-f])*0a$")
  string(APPEND problems "  stderr holds a control character (bytes: ${err_hex})\n")
endif()
string(FIND "${err}" "${EXPECT}" at)
if(at EQUAL -1)
  string(APPEND problems "  stderr does not say \"${EXPECT}\"\n")
endif()
if(problems)
  message(FATAL_ERROR "attn-calc ${ARGS}\n${problems}")
endif()
