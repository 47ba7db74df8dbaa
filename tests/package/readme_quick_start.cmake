# cmake -DREADME=.../README.md -P readme_quick_start.cmake
# README.md must state the two quick-start lines exactly as .ci/run and our presets make them
# work (.ci/run runs line 2 verbatim).
set(lines
  "cmake --workflow --preset default && ./build/default/examples/attn-calc"
  "apt-get update && apt-get install -y catch2 && cmake --workflow --preset test")
if(NOT EXISTS "${README}")
  message(STATUS "SKIPPED: ${README} does not exist yet")
  return()
endif()
file(READ "${README}" readme)
string(REPLACE "\r" "" readme "\n${readme}\n")
foreach(line IN LISTS lines)
  string(FIND "${readme}" "\n${line}\n" index)
  if(index EQUAL -1)
    # Show the README's nearest candidates, so a drift is plain to see.
    string(REGEX MATCHALL "\n[^\n]*cmake --workflow[^\n]*" found "${readme}")
    list(JOIN found "" found)
    string(REPLACE "\n" "\n    " found "${found}")
    message(FATAL_ERROR "README.md must contain this quick-start line, on a line of its own:\n"
                        "    ${line}\n"
                        "(.ci/run and tests/package/readme_quick_start.cmake hold the same line.)\n"
                        "README.md's lines that run cmake --workflow:${found}")
  endif()
endforeach()
