# Runs an example against the PostgreSQL server of the tests' `pg` fixture.
#
#   cmake -DSTATE_DIR=<build>/tests/pg-state -DEXE=<program> -P run_with_pg.cmake
#
# The fixture's setup (pg_test_server start) writes STATE_DIR/conninfo.json; its "url" (a
# postgresql:// URL with the password and the socket) is known only then, so this script reads
# it and runs EXE with RECAP_PG_URL set to it. EXE's output is passed through; the script fails when
# EXE exits with anything but 0. The URL itself is never echoed (it holds the password).
cmake_minimum_required(VERSION 3.19)  # string(JSON)

foreach(var STATE_DIR EXE)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_with_pg.cmake: pass -D${var}=...")
  endif()
endforeach()

set(state_file "${STATE_DIR}/conninfo.json")
if(NOT EXISTS "${state_file}")
  message(FATAL_ERROR
    "run_with_pg.cmake: ${state_file} does not exist: the PostgreSQL fixture's server is not "
    "running (run this through ctest, whose test postgres.server.start starts it)")
endif()
file(READ "${state_file}" state)
string(JSON url ERROR_VARIABLE json_error GET "${state}" url)
if(json_error OR "${url}" STREQUAL "")
  message(FATAL_ERROR "run_with_pg.cmake: no \"url\" in ${state_file}: ${json_error}")
endif()

# EXE's output and errors go straight to this script's (ctest shows them).
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env --unset=RECAP_PG_SCHEMA "RECAP_PG_URL=${url}" "${EXE}"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "run_with_pg.cmake: ${EXE} exited with ${rc}")
endif()
