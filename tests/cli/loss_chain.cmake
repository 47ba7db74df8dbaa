# The loss curve from a training run to a picture, as docs/model.md gives it:
#   tiny_transformer --log LOG && attn-calc --loss-curve LOG --vocabulary 5 --format svg --output SVG
# then checks the log (a header step,loss and a row per step, the first loss near ln 5) and the
# SVG (well-formed XML by check_xml, one line for the run, ln 5 as the dashed reference).
#   cmake -DTRAIN=<tiny_transformer> -DCALC=<attn-calc> -DCHECK_XML=<check_xml> -DWORK=<dir> -P loss_chain.cmake
cmake_minimum_required(VERSION 3.25)
file(MAKE_DIRECTORY "${WORK}")
set(log "${WORK}/tiny_transformer_log.csv")
set(svg "${WORK}/tiny_transformer_curve.svg")
file(REMOVE "${log}" "${svg}")
execute_process(COMMAND "${TRAIN}" --log "${log}" OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tiny_transformer --log exited with ${rc}:\n${err}")
endif()
file(STRINGS "${log}" rows)
list(LENGTH rows n)
list(GET rows 0 header)
list(GET rows 1 first)
if(NOT header STREQUAL "step,loss" OR n LESS 10 OR NOT first MATCHES "^0,1\\.[4-8]")
  message(FATAL_ERROR "${log}: expected the header step,loss, at least 9 rows and a first loss near ln 5 = 1.609; "
                      "got ${n} lines starting \"${header}\", \"${first}\"")
endif()
execute_process(COMMAND "${CALC}" --loss-curve "${log}" --vocabulary 5 --format svg --output "${svg}"
                ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT EXISTS "${svg}")
  message(FATAL_ERROR "attn-calc --loss-curve exited with ${rc} (${svg} written: no):\n${err}")
endif()
execute_process(COMMAND "${CHECK_XML}" "${svg}" ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${err}")
endif()
file(READ "${svg}" text)
string(REGEX MATCHALL "<polyline " lines "${text}")
list(LENGTH lines polylines)
if(NOT text MATCHES "^<svg " OR NOT polylines EQUAL 1 OR NOT text MATCHES "ln 5 = 1\\.609 \\(chance\\)"
   OR NOT text MATCHES ">loss \\(nats\\)<" OR NOT text MATCHES ">step<")
  message(FATAL_ERROR "${svg}: expected an <svg> with one <polyline>, the axes \"step\" and \"loss (nats)\" and "
                      "\"ln 5 = 1.609 (chance)\"; it has ${polylines} polylines")
endif()
