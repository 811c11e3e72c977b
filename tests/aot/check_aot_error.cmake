# Runs attnjit-aot with ARGS (a ;-list) and --out WORK_DIR/bundle; passes when it fails, its
# message holds EXPECT, and it wrote no bundle.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${AOT} ${ARGS} --out ${WORK_DIR}/bundle --quiet
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "attnjit-aot ${ARGS} succeeded; expected an error saying '${EXPECT}'")
endif()
string(FIND "${out}${err}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "attnjit-aot ${ARGS} failed (${rc}) without saying '${EXPECT}':\n${out}${err}")
endif()
if(EXISTS ${WORK_DIR}/bundle/manifest.json)
  message(FATAL_ERROR "attnjit-aot ${ARGS} failed but wrote a bundle")
endif()
message("attnjit-aot failed as expected (${rc}): ${err}")
