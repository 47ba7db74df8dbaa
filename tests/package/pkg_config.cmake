# cmake -DPKG_CONFIG=... -DPREFIX=... -DCXX=... -DVERSION=... -DSOURCE=... -P pkg_config.cmake
# Asks pkg-config for attn's flags from the installed attn.pc and compiles SOURCE with them.
if(NOT PKG_CONFIG)
  message(STATUS "SKIPPED: pkg-config is not installed")
  return()
endif()
set(ENV{PKG_CONFIG_PATH} "${PREFIX}/share/pkgconfig")
unset(ENV{PKG_CONFIG_LIBDIR})

function(pkg_config out)
  execute_process(COMMAND "${PKG_CONFIG}" ${ARGN} attn
    RESULT_VARIABLE rc OUTPUT_VARIABLE value ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config ${ARGN} attn failed:\n${err}")
  endif()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

pkg_config(version --modversion)
pkg_config(cflags --cflags)
pkg_config(libs --libs)
message(STATUS "attn ${version}: cflags '${cflags}', libs '${libs}'")
if(NOT version STREQUAL VERSION)
  message(FATAL_ERROR "pkg-config says version ${version}, the project is ${VERSION}")
endif()
if(NOT libs STREQUAL "")
  message(FATAL_ERROR "a header-only library needs no libs, but pkg-config says '${libs}'")
endif()

separate_arguments(cflags UNIX_COMMAND "${cflags}")
execute_process(COMMAND "${CXX}" -std=c++20 ${cflags} -fsyntax-only "${SOURCE}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compiling with pkg-config's flags failed:\n${out}")
endif()
