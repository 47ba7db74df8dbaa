# attn-calc's LaTeX through pdfLaTeX, with the preamble docs/course-authors.md documents
# (booktabs, amsmath), for the map, --self with two heads and a causal mask, --cross,
# --dot-vs-scaled, --beta-sweep, the lessons (--pe, --rope, --layer-norm, --rms-norm,
# --activations, --block, with --steps) --loss-curve (runs named with the tricky characters) and --no-peeking (W10):
# labels with < > | " [ % & $ # ~ ^ _ { } \ -- and a comma must compile,
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
file(WRITE "${WORK}/mask.txt" "1,1,1,1,1,0\n1,1,1,1,0,0\n1,1,1,1,1,1\n")
set(inputs --q "@${WORK}/queries.csv" --notes "@${WORK}/notes.csv")
foreach(run full map self cross compare sweep pe rope norm rms activations block loss peek)
  set(ref attn:map)
  if(run STREQUAL "pe")  # the lessons of §8–§9, with their steps
    set(args --pe --positions 4 --dim 4 --steps --format latex)
    set(ref attn:pe)
  elseif(run STREQUAL "rope")
    set(args --rope 1,-0.5 --position 3 --pair 1 --layout half-split --steps --format latex)
    set(ref attn:rotation)
  elseif(run STREQUAL "norm")
    set(args --layer-norm "@${WORK}/notes.csv" --ln-gamma 1,2 --ln-beta 0,-1 --steps --format latex)
    set(ref attn:y)
  elseif(run STREQUAL "rms")
    set(args --rms-norm "@${WORK}/queries.csv" --steps --format latex)
    set(ref attn:y)
  elseif(run STREQUAL "activations")
    set(args --activations -1,0,2 --steps --format latex)
    set(ref attn:activations)
  elseif(run STREQUAL "block")  # a block of its own on the tricky labels as words
    file(WRITE "${WORK}/w1.csv" "1,-1,0.5\n0,1,1\n")
    file(WRITE "${WORK}/w2.csv" "1,0\n0,1\n0.5,0.5\n")
    set(args --block --pre-ln --self "@${WORK}/notes.csv" --words "@${CLI}/tricky_labels.txt" --ffn-w1 "@${WORK}/w1.csv"
             --ffn-w2 "@${WORK}/w2.csv" --format latex)
    set(ref attn:Y)
  elseif(run STREQUAL "cross")  # cross-attention with a bias, the tricky labels on both sides
    set(args --q "@${WORK}/queries.csv" --cross "@${WORK}/notes.csv" ${labels} --bk 0,1 --heads 2 --format latex)
    set(ref attn:map-head1)
  elseif(run STREQUAL "sweep")  # --beta-sweep: one query, a masked note
    set(args --q 0,1 --notes "@${WORK}/notes.csv" --note-labels "@${CLI}/tricky_labels.txt" --query-labels "<s>"
             --mask 1,1,1,1,1,0 --beta-sweep 0:2:0.5 --format latex)
    set(ref attn:sweep)
  elseif(run STREQUAL "peek")  # --no-peeking: W10's map, logits and losses
    set(args --no-peeking --format latex)
    set(ref attn:losses)
  elseif(run STREQUAL "loss")  # --loss-curve: runs named with LaTeX's special characters, in a file with _
    file(WRITE "${WORK}/run_log.csv" "run,step,loss,tokens_per_second\n50% & $5 #1,0,1.6,100\n50% & $5 #1,10,0.5,200\n"
               "a_b {c} ~^\\,0,1.6,100\n")
    set(args --loss-curve "${WORK}/run_log.csv" --vocabulary 5 --format latex)
    set(ref attn:log-1)
  elseif(run STREQUAL "full")
    set(args ${inputs} ${labels} --mask 1,1,1,1,1,0 --steps --no-attention --jacobian --format latex)
  elseif(run STREQUAL "map")
    set(args ${inputs} ${labels} --format latex --map-only --title "The map of <s> [and] \"q\"")
  elseif(run STREQUAL "self")  # two heads of self-attention, causal, the tricky labels as words
    set(args --self "@${WORK}/notes.csv" --words "@${CLI}/tricky_labels.txt" --heads 2 --mask causal --format latex)
    set(ref attn:map-head1)
  else()  # the dot map and the scaled one, with a mask matrix
    set(args ${inputs} ${labels} --dot-vs-scaled --mask "@${WORK}/mask.txt" --format latex)
    set(ref attn:map-scaled-dot)
  endif()
  execute_process(COMMAND "${CALC}" ${args} OUTPUT_FILE "${WORK}/${run}.tex" RESULT_VARIABLE rc
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "attn-calc ${args} exited with ${rc}: ${err}")
  endif()
  file(WRITE "${WORK}/doc_${run}.tex" "\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{amsmath}\n"
             "\\begin{document}\n\\input{${run}.tex}\nThe map is Table~\\ref{${ref}}.\n\\end{document}\n")
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
  if(PDFTOTEXT AND run MATCHES "^(full|map|self|cross|compare)$")  # the runs with the tricky labels
    execute_process(COMMAND "${PDFTOTEXT}" "doc_${run}.pdf" - WORKING_DIRECTORY "${WORK}" OUTPUT_VARIABLE text)
    # OT1 used to print < > | " as ¡ ¿ — ” and -- as an en dash
    set(typed_labels "<eos>" "[x]" "a|b \"q\"" "50% & $5 #1" "a--b" "Table 1")
    if(NOT run STREQUAL "self")  # --self's words are the note labels alone
      list(APPEND typed_labels "[CLS]" "<s>" "\"q\"")
    endif()
    foreach(typed ${typed_labels})
      string(FIND "${text}" "${typed}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "the PDF of attn-calc ${args} does not show ${typed} as typed:\n${text}")
      endif()
    endforeach()
  endif()
endforeach()
message(STATUS "pdflatex typeset attn-calc's LaTeX; every label printed as typed")
