# cmake -DBUILD_DIR=... -DCONFIG=... -DTARGET=... -DCONTROL=... -DEXPECT=<regex>
#       [-DFIRST_DIAGNOSTIC=ON] -P check.cmake
# Passes when CONTROL builds and TARGET fails to build with output matching EXPECT; with
# FIRST_DIAGNOSTIC, EXPECT must match the first diagnostic, and at most one more may follow.
foreach(var IN ITEMS BUILD_DIR TARGET CONTROL EXPECT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check.cmake: ${var} is not set")
  endif()
endforeach()
set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()

execute_process(
  COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" ${config_args} --target "${CONTROL}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "The control ${CONTROL} (the same file without ATTN_COMPILE_FAIL) must "
                      "compile, but it failed:\n${out}")
endif()

execute_process(
  COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" ${config_args} --target "${TARGET}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but it must not.")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "${TARGET} failed to compile as it should, but its diagnostic does not "
                      "match \"${EXPECT}\":\n${out}")
endif()
if(FIRST_DIAGNOSTIC)
  # GCC and Clang: "file:line:col: [fatal ]error: ..." or "...: warning: ...".
  string(REGEX MATCHALL "[^\n]*: (fatal error|error|warning): [^\n]*" diagnostics "${out}")
  list(LENGTH diagnostics count)
  if(count EQUAL 0)
    message(FATAL_ERROR "${TARGET}: no diagnostic of the form 'file:line: error: ...' in:\n${out}")
  endif()
  list(GET diagnostics 0 first)
  if(NOT first MATCHES "${EXPECT}" OR count GREATER 2)
    message(FATAL_ERROR "${TARGET}: the first diagnostic must match \"${EXPECT}\" and at most "
                        "one more may follow; there are ${count}, the first is\n  ${first}\n"
                        "The output:\n${out}")
  endif()
endif()
message(STATUS "${TARGET} failed to compile, with the expected diagnostic (\"${EXPECT}\").")
