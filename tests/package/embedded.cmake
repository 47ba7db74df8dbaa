# cmake -DBUILD_DIR=... -DCONFIG=... -DPREFIX=... -DINCLUDE_DIR=<attn's include/> -P embedded.cmake
# Run after a consumer that embeds attn (add_subdirectory/, fetch_content/) was built:
#   - the consumer compiled with attn's include directory as a system one (compile_commands.json);
#   - cmake --install installs the consumer's exported library `lesson`, whose link interface
#     names attn::attn, and nothing of attn's (ATTN_INSTALL is OFF when embedded);
#   - the consumer runs.
set(problems)

set(commands_file "${BUILD_DIR}/compile_commands.json")
if(EXISTS "${commands_file}")
  file(READ "${commands_file}" commands)
  string(REGEX MATCH "\"command\": \"[^\n]*consumer\\.cpp[^\n]*" command "${commands}")
  string(FIND "${command}" "-isystem ${INCLUDE_DIR}" as_system)
  string(FIND "${command}" "-I${INCLUDE_DIR}" as_plain)
  if(as_system EQUAL -1 OR NOT as_plain EQUAL -1)
    list(APPEND problems "consumer.cpp must see ${INCLUDE_DIR} as a system include:\n  ${command}")
  endif()
else()
  message(STATUS "no compile_commands.json (this generator writes none): the system-include check is not made")
endif()

file(REMOVE_RECURSE "${PREFIX}")
set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${config_args}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install of the consumer failed:\n${out}")
endif()
set(lesson_targets "${PREFIX}/share/cmake/lesson/lessonTargets.cmake")
if(NOT EXISTS "${lesson_targets}")
  list(APPEND problems "the consumer's export ${lesson_targets} was not installed")
else()
  file(READ "${lesson_targets}" exported)
  if(NOT exported MATCHES "INTERFACE_LINK_LIBRARIES \"attn::attn\"")
    list(APPEND problems "lessonTargets.cmake must link attn::attn:\n${exported}")
  endif()
endif()
file(GLOB_RECURSE installed RELATIVE "${PREFIX}" "${PREFIX}/*")
list(FILTER installed EXCLUDE REGEX "^share/cmake/lesson/")
if(installed)
  list(APPEND problems "an embedded attn must install nothing by default, but these were: ${installed}")
endif()

set(consumer)
foreach(candidate IN ITEMS "${BUILD_DIR}/consumer" "${BUILD_DIR}/consumer.exe"
                           "${BUILD_DIR}/${CONFIG}/consumer" "${BUILD_DIR}/${CONFIG}/consumer.exe")
  if(NOT consumer AND EXISTS "${candidate}" AND NOT IS_DIRECTORY "${candidate}")
    set(consumer "${candidate}")
  endif()
endforeach()
execute_process(COMMAND "${consumer}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  list(APPEND problems "the consumer ${consumer} exited with ${rc}")
endif()

if(problems)
  list(JOIN problems "\n" problems)
  message(FATAL_ERROR "${problems}")
endif()
