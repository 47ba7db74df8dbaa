# Included by the add_subdirectory and fetch_content consumers once attn::attn exists: what a
# project that embeds attn does with it, then the checks (embedded.cmake checks the rest after
# the build).
add_executable(consumer "${CMAKE_CURRENT_LIST_DIR}/consumer.cpp")
target_link_libraries(consumer PRIVATE attn::attn)

# A library of the user's own that links attn::attn, installed and exported (its users then
# find_dependency(attn) before they include lessonTargets.cmake).
add_library(lesson INTERFACE)
target_link_libraries(lesson INTERFACE attn::attn)
install(TARGETS lesson EXPORT lessonTargets)
install(EXPORT lessonTargets NAMESPACE lesson:: DESTINATION share/cmake/lesson)

# The checks: not part of the lines a user writes.
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
