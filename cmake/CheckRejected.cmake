# SPDX-License-Identifier: Apache-2.0
# cmake -DCOMMAND="program@@arg1@@arg2" -DEXPECT=regex -P CheckRejected.cmake   (@@ separates items)
# Passes only if the program rejects its arguments: it exits with a non-zero status, and its
# output (standard output and error together) matches EXPECT, the message naming the bad field.
string(REPLACE "@@" ";" COMMAND "${COMMAND}")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(status EQUAL 0)
  message(FATAL_ERROR "accepted (exit status 0), should have been rejected: ${COMMAND}\n${out}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "rejected (status ${status}) without the expected message '${EXPECT}':\n${out}")
endif()
message(STATUS "rejected (status ${status}): ${out}")
