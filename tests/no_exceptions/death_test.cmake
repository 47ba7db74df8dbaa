# Runs PROGRAM with CASE and passes when it aborts (a signal or a non-zero exit, not 0) with
# EXPECT on stderr: what an error prints in a build without exceptions.
#   cmake -DPROGRAM=<exe> -DCASE=<name> -DEXPECT=<text> -P death_test.cmake
execute_process(COMMAND "${PROGRAM}" "${CASE}" RESULT_VARIABLE result OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(result STREQUAL "0")
  message(FATAL_ERROR "${CASE}: exited normally (stdout: ${out}); an abort was expected")
endif()
string(FIND "${err}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${CASE}: stderr does not hold \"${EXPECT}\":\n${err}\n(result: ${result})")
endif()
message(STATUS "${CASE}: aborted (${result}) with \"${EXPECT}\"")
