# attnjit-gen ${ARGS} | FileCheck ${CHECK}, failing on either. Run with cmake -P.
execute_process(COMMAND ${GEN} ${ARGS} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "attnjit-gen ${ARGS} failed (${rc}):\n${err}")
endif()
string(RANDOM LENGTH 12 tag)
set(tmp ${CMAKE_CURRENT_BINARY_DIR}/filecheck_input_${tag}.cu)
file(WRITE ${tmp} "${out}")
execute_process(COMMAND ${FILECHECK} ${CHECK} --input-file=${tmp} --dump-input=fail
                RESULT_VARIABLE rc OUTPUT_VARIABLE fc_out ERROR_VARIABLE fc_err)
file(REMOVE ${tmp})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "FileCheck ${CHECK} failed on the output of attnjit-gen ${ARGS}:\n${fc_out}${fc_err}")
endif()
