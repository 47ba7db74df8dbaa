# attn-calc's LaTeX through pdfLaTeX, with the preamble docs/course-authors.md documents
# (booktabs, amsmath): labels with < > | " [ % & $ # ~ ^ _ { } \ -- and a comma must compile,
# and, when pdftotext is installed, print as typed. Skipped (not failed) without pdflatex.
#   cmake -DCALC=<attn-calc> -DCLI=<tests/cli> -DWORK=<scratch dir> [-DPDFLATEX=<path>]
#         [-DPDFTOTEXT=<path>] -P latex.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT PDFLATEX)
  message("SKIPPED: pdflatex was not found when this tree was configured")
  return()
endif()
file(MAKE_DIRECTORY "${WORK}")
set(labels "--note-labels" "@${CLI}/tricky_labels.txt" "--query-labels" "[CLS],<s>,\"q\"")
file(WRITE "${WORK}/queries.csv" "0,1\n1,0\n1,1\n")
file(WRITE "${WORK}/notes.csv" "1,0\n0,1\n1,1\n-1,0\n0,-1\n2,0\n")
set(inputs --q "@${WORK}/queries.csv" --notes "@${WORK}/notes.csv")
foreach(run full map)
  if(run STREQUAL "full")
    set(args ${inputs} ${labels} --mask 1,1,1,1,1,0 --steps --no-attention --jacobian --format latex)
  else()
    set(args ${inputs} ${labels} --format latex --map-only --title "The map of <s> [and] \"q\"")
  endif()
  execute_process(COMMAND "${CALC}" ${args} OUTPUT_FILE "${WORK}/${run}.tex" RESULT_VARIABLE rc
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "attn-calc ${args} exited with ${rc}: ${err}")
  endif()
  file(WRITE "${WORK}/doc_${run}.tex" "\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{amsmath}\n"
             "\\begin{document}\n\\input{${run}.tex}\nThe map is Table~\\ref{attn:map}.\n\\end{document}\n")
  foreach(pass 1 2)  # twice, so that \ref finds the \label
    execute_process(COMMAND "${PDFLATEX}" -interaction=nonstopmode -halt-on-error "doc_${run}.tex"
                    WORKING_DIRECTORY "${WORK}" OUTPUT_VARIABLE log RESULT_VARIABLE rc)
  endforeach()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pdflatex could not typeset attn-calc ${args}:\n${log}")
  endif()
  file(READ "${WORK}/doc_${run}.log" log)
  foreach(problem "Missing character" "undefined" "Undefined control sequence")
    string(FIND "${log}" "${problem}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "pdflatex on attn-calc ${args} reports \"${problem}\" (see ${WORK}/doc_${run}.log)")
    endif()
  endforeach()
  if(PDFTOTEXT)
    execute_process(COMMAND "${PDFTOTEXT}" "doc_${run}.pdf" - WORKING_DIRECTORY "${WORK}" OUTPUT_VARIABLE text)
    # OT1 used to print < > | " as ¡ ¿ — ” and -- as an en dash
    foreach(typed "<eos>" "[x]" "a|b \"q\"" "50% & $5 #1" "a--b" "[CLS]" "<s>" "\"q\"" "Table 1")
      string(FIND "${text}" "${typed}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "the PDF of attn-calc ${args} does not show ${typed} as typed:\n${text}")
      endif()
    endforeach()
  endif()
endforeach()
message(STATUS "pdflatex typeset attn-calc's LaTeX; every label printed as typed")
