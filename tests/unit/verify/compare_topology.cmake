# Runs `weft topology NAME` and fails unless its output equals FILE byte for byte.
execute_process(COMMAND ${WEFT} topology ${NAME} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "weft topology ${NAME} exited with ${rc}")
endif()
file(READ ${FILE} want)
if(NOT out STREQUAL want)
  message(FATAL_ERROR "weft topology ${NAME} differs from ${FILE}")
endif()
