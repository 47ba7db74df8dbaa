# cmake -DBUILD_DIR=... -DCONFIG=... -DPREFIX=... -DSOURCE_DIR=... [-DCALC=1] -P install.cmake
# Installs the build into a fresh PREFIX and checks what landed there; with CALC (the build has
# attn-calc), then installs the component attn-calc and checks that it adds bin/attn-calc.
file(REMOVE_RECURSE "${PREFIX}")
set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()
execute_process(
  COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${config_args}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed:\n${out}")
endif()

set(problems)
# Beside the headers: exactly the package files and the license (attn-calc only when asked for).
set(expected share/cmake/attn/attnConfig.cmake share/cmake/attn/attnConfigVersion.cmake
             share/cmake/attn/attnTargets.cmake share/doc/attn/LICENSE share/pkgconfig/attn.pc)
file(GLOB_RECURSE installed RELATIVE "${PREFIX}" "${PREFIX}/*")
list(FILTER installed EXCLUDE REGEX "^include/")
list(SORT installed)
if(NOT installed STREQUAL expected)
  list(JOIN expected " " expected)
  list(JOIN installed " " installed)
  list(APPEND problems "beside include/, cmake --install must install exactly\n  ${expected}\nbut it installed\n  ${installed}")
endif()
if(EXISTS "${PREFIX}/share/doc/attn/LICENSE")
  file(READ "${SOURCE_DIR}/LICENSE" license)
  file(READ "${PREFIX}/share/doc/attn/LICENSE" installed_license)
  if(NOT license STREQUAL installed_license)
    list(APPEND problems "share/doc/attn/LICENSE is not the source tree's LICENSE")
  endif()
endif()

# Every header of the source tree is installed, and nothing else lands in include/.
file(GLOB_RECURSE source_headers RELATIVE "${SOURCE_DIR}/include" "${SOURCE_DIR}/include/*")
file(GLOB_RECURSE installed_headers RELATIVE "${PREFIX}/include" "${PREFIX}/include/*")
list(SORT source_headers)
list(SORT installed_headers)
if(NOT source_headers STREQUAL installed_headers)
  list(APPEND problems "include/ differs from the source tree:\n  source:    ${source_headers}\n  installed: ${installed_headers}")
endif()

# The exported target carries no flags, definitions or libraries (our warnings stay ours).
file(READ "${PREFIX}/share/cmake/attn/attnTargets.cmake" targets)
foreach(word IN ITEMS INTERFACE_COMPILE_OPTIONS INTERFACE_COMPILE_DEFINITIONS INTERFACE_LINK_LIBRARIES
                      attn_warnings)
  if(targets MATCHES "${word}")
    list(APPEND problems "attnTargets.cmake mentions ${word}")
  endif()
endforeach()

file(READ "${PREFIX}/share/pkgconfig/attn.pc" pc)
if(pc MATCHES "\nLibs")
  list(APPEND problems "attn.pc has a Libs line; a header-only library needs none")
endif()

if(CALC)
  execute_process(
    COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${config_args}
            --component attn-calc
    RESULT_VARIABLE rc OUTPUT_VARIABLE calc_out ERROR_VARIABLE calc_out)
  file(GLOB_RECURSE tools RELATIVE "${PREFIX}" "${PREFIX}/bin/*")
  if(NOT rc EQUAL 0 OR NOT tools MATCHES "^bin/attn-calc(\\.exe)?$")
    list(APPEND problems "cmake --install --component attn-calc must install bin/attn-calc, and it "
                         "installed '${tools}':\n${calc_out}")
  endif()
endif()

if(problems)
  list(JOIN problems "\n" problems)
  message(FATAL_ERROR "${problems}\n\ncmake --install said:\n${out}")
endif()
message(STATUS "installed into ${PREFIX}")
