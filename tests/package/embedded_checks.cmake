# Included at the end of the add_subdirectory and fetch_content consumers: the checks that are
# the test, not part of the lines a user writes. embedded.cmake checks the rest after the build.
foreach(option IN ITEMS ATTN_BUILD_TESTS ATTN_BUILD_EXAMPLES ATTN_BUILD_BENCHMARKS ATTN_INSTALL)
  if(${option})
    message(FATAL_ERROR "${option} must default to OFF when attn is embedded")
  endif()
endforeach()
foreach(property IN ITEMS INTERFACE_COMPILE_OPTIONS INTERFACE_COMPILE_DEFINITIONS
                          INTERFACE_LINK_LIBRARIES INTERFACE_LINK_OPTIONS)
  get_target_property(value attn ${property})
  if(value)
    message(FATAL_ERROR "attn::attn must impose nothing on its users, but ${property} is '${value}'")
  endif()
endforeach()
