# attn-lesson, the lesson page (docs/course-authors.md, "The lesson page"); included by
# examples/CMakeLists.txt beside attn-calc.
#   attn-lesson                 the native tool that writes the page (always built with the examples)
#   attn_lesson_module          attn compiled to WebAssembly by emcc (-DATTN_BUILD_LESSON_PAGE=ON)
#   example_lesson_module       the module's functions, compiled natively, against the unit's numbers
#   attn_lesson_bad_widget      bad input: exit code 2 and a line naming the option
#   attn_lesson_page            the page in headless Chromium, every control against attn-calc's JSON
#   attn_lesson_screenshots     desktop and phone screenshots of the page, for a person to look at
# The browser tests are skipped, saying why, without the module, node, playwright-core
# (cd examples/attn_lesson/tests && npm ci) or Chromium (/usr/bin/chromium, or ATTN_CHROMIUM);
# with ATTN_LESSON_REQUIRE=1 in the environment (as .ci/run sets it) a missing piece fails them.
option(ATTN_BUILD_LESSON_PAGE "Build attn-lesson, its WebAssembly module (emcc; Debian: apt-get install emscripten) and its browser tests" OFF)
set(attn_lesson_dir "${PROJECT_SOURCE_DIR}/examples/attn_lesson")
set(attn_lesson_module "${CMAKE_CURRENT_BINARY_DIR}/lesson_module.js")
set(attn_lesson_work "${CMAKE_CURRENT_BINARY_DIR}/lesson_out")

if(NOT ATTN_BUILD_LESSON_PAGE)
  # Nothing to build in the quick start; the browser tests say how to run them.
  foreach(name attn_lesson_page attn_lesson_screenshots)
    add_test(NAME ${name} COMMAND "${CMAKE_COMMAND}" -E echo
      "SKIPPED: the lesson page is not configured: cmake -DATTN_BUILD_LESSON_PAGE=ON (needs emcc, node, chromium and npm ci in examples/attn_lesson/tests)")
    set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED:" LABELS lesson)
  endforeach()
  return()
endif()

add_executable(attn-lesson attn_lesson/main.cpp)
target_link_libraries(attn-lesson PRIVATE attn::attn attn_warnings)
target_compile_definitions(attn-lesson PRIVATE
  "ATTN_LESSON_MODULE=\"${attn_lesson_module}\"" "ATTN_LESSON_TEMPLATE=\"${attn_lesson_dir}/page.html\"")
install(TARGETS attn-lesson RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT attn-lesson EXCLUDE_FROM_ALL)

# The module's functions natively: E1 at β = 1 and 2, attn-calc's rounding, the W12 counts.
add_executable(example_lesson_module attn_lesson/module_check.cpp attn_lesson/lesson_module.cpp)
target_link_libraries(example_lesson_module PRIVATE attn::attn attn_warnings)
add_test(NAME example_lesson_module COMMAND example_lesson_module)
set_tests_properties(example_lesson_module PROPERTIES LABELS "example;lesson")

# Bad input: one line naming the problem (and exit code 2; the page is never written).
add_test(NAME attn_lesson_bad_widget COMMAND attn-lesson --widgets translate,chart --output "${attn_lesson_work}/never.html")
set_tests_properties(attn_lesson_bad_widget PROPERTIES LABELS lesson
  PASS_REGULAR_EXPRESSION "attn-lesson: --widgets: \"chart\" is not a widget")
add_test(NAME attn_lesson_bad_mask COMMAND attn-lesson --mask causal --output "${attn_lesson_work}/never.html")
set_tests_properties(attn_lesson_bad_mask PROPERTIES LABELS lesson
  PASS_REGULAR_EXPRESSION "attn-lesson: --mask is not shown by the lesson page")
add_test(NAME attn_lesson_bad_sweep COMMAND attn-lesson --beta-sweep 0:2:0.5 --output "${attn_lesson_work}/never.html")
set_tests_properties(attn_lesson_bad_sweep PROPERTIES LABELS lesson
  PASS_REGULAR_EXPRESSION "attn-lesson: --beta-sweep is attn-calc's chart")
add_test(NAME attn_lesson_bad_module COMMAND attn-lesson --module "${attn_lesson_work}/none.js" --output "${attn_lesson_work}/never.html")
set_tests_properties(attn_lesson_bad_module PROPERTIES LABELS lesson
  PASS_REGULAR_EXPRESSION "attn-lesson: cannot read the WebAssembly module")
add_test(NAME attn_lesson_bad_block COMMAND attn-lesson --ffn-w1 1,0 --ffn-w2 1 --output "${attn_lesson_work}/never.html")
set_tests_properties(attn_lesson_bad_block PROPERTIES LABELS lesson
  PASS_REGULAR_EXPRESSION "attn-lesson: --ffn-w1 and --ffn-w2 need --self")
add_test(NAME attn_lesson_bad_seed COMMAND attn-lesson --seed -3 --output "${attn_lesson_work}/never.html")
set_tests_properties(attn_lesson_bad_seed PROPERTIES LABELS lesson
  PASS_REGULAR_EXPRESSION "attn-lesson: --seed: \"-3\" is not a whole number in 0..4294967295")
add_test(NAME attn_lesson_bad_number COMMAND attn-lesson --q 0,abc,2 --output "${attn_lesson_work}/never.html")
set_tests_properties(attn_lesson_bad_number PROPERTIES LABELS lesson
  PASS_REGULAR_EXPRESSION "attn-lesson: --q: \"abc\" is not a number")

# Debian's emcc runs its JS optimizer with Debian's node-acorn, found through NODE_PATH.
set(ATTN_NODE_PATH "/usr/share/nodejs" CACHE PATH "Where Debian's node-acorn is, for emcc's JS optimizer")
find_program(ATTN_EMXX NAMES em++)
if(ATTN_EMXX)
  set(attn_lesson_exports _malloc _free _lesson_error _lesson_fixed _lesson_colour _lesson_align
      _lesson_additive_steps _lesson_no_attention _lesson_self _lesson_block _lesson_model _lesson_sinusoidal _lesson_rope _lesson_price)
  list(JOIN attn_lesson_exports "," attn_lesson_exports)
  # -Oz: the page was 479 KB, against 626 KB at -O2, in the same build time (about 20 s) and with
  # the same numbers (no fast-math either way); 567 KB with the block and the tiny model; one file
  # with the wasm inside as base64 (SINGLE_FILE); exceptions on, so that the library's errors
  # reach the page as its messages.
  add_custom_command(OUTPUT "${attn_lesson_module}"
    COMMAND "${CMAKE_COMMAND}" -E env "NODE_PATH=${ATTN_NODE_PATH}"
            "${ATTN_EMXX}" -std=c++20 -Oz -fexceptions "-I${PROJECT_SOURCE_DIR}/include"
            "${attn_lesson_dir}/lesson_module.cpp" -o "${attn_lesson_module}"
            -sMODULARIZE=1 -sEXPORT_NAME=attnLessonModule -sSINGLE_FILE=1 -sENVIRONMENT=web
            -sALLOW_MEMORY_GROWTH=1 "-sEXPORTED_FUNCTIONS=${attn_lesson_exports}"
            -sEXPORTED_RUNTIME_METHODS=UTF8ToString
    DEPENDS "${attn_lesson_dir}/lesson_module.cpp" ${attn_headers}
    COMMENT "emcc: attn to WebAssembly for the lesson page" VERBATIM)
  add_custom_target(attn_lesson_module ALL DEPENDS "${attn_lesson_module}")
else()
  message(STATUS "attn-lesson: no em++ found, so no WebAssembly module: the browser tests will be skipped")
endif()

find_program(ATTN_NODE NAMES node nodejs)
if(ATTN_NODE)
  add_test(NAME attn_lesson_page
    COMMAND "${ATTN_NODE}" "${attn_lesson_dir}/tests/check_page.mjs" "$<TARGET_FILE:attn-lesson>"
            "$<TARGET_FILE:attn-calc>" "${attn_lesson_work}" --module "${attn_lesson_module}")
  add_test(NAME attn_lesson_screenshots
    COMMAND "${ATTN_NODE}" "${attn_lesson_dir}/tests/screenshots.mjs" "${attn_lesson_work}/lesson.html"
            "${attn_lesson_work}/screenshots")
  set_tests_properties(attn_lesson_page attn_lesson_screenshots PROPERTIES SKIP_RETURN_CODE 77 LABELS lesson)
  set_tests_properties(attn_lesson_page PROPERTIES FIXTURES_SETUP attn_lesson_page_file)
  set_tests_properties(attn_lesson_screenshots PROPERTIES FIXTURES_REQUIRED attn_lesson_page_file)
else()
  foreach(name attn_lesson_page attn_lesson_screenshots)
    add_test(NAME ${name} COMMAND "${CMAKE_COMMAND}" -E echo "SKIPPED: no node (Node.js) for the browser tests")
    set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED:" LABELS lesson)
  endforeach()
endif()
