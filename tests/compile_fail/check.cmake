# cmake -DBUILD_DIR=... -DCONFIG=... -DTARGET=... -DCONTROL=... -DEXPECT=<regex> -P check.cmake
# Passes when CONTROL builds and TARGET fails to build with output matching EXPECT.
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
message(STATUS "${TARGET} failed to compile, with the expected diagnostic (\"${EXPECT}\").")
