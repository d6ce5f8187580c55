# cmake -DSOURCE_DIR=… -DBINARY_DIR=… -DPREFIX=… -DGENERATOR=… [-DTOOLCHAIN_ARGS=…]
#       -P expect_missing_component.cmake
#
# 1. find_package(recap REQUIRED COMPONENTS nosuch) must fail at configure time with a message
#    that names the missing component and the installed ones.
# 2. The same component as OPTIONAL_COMPONENTS must configure fine.
function(configure_consumer binary_dir out_rc out_text)
  file(REMOVE_RECURSE "${binary_dir}")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${binary_dir}" -G "${GENERATOR}"
            "-DCMAKE_PREFIX_PATH=${PREFIX}" ${TOOLCHAIN_ARGS} ${ARGN}
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  set(${out_rc} "${rc}" PARENT_SCOPE)
  set(${out_text} "${out}${err}" PARENT_SCOPE)
endfunction()

configure_consumer("${BINARY_DIR}/required" rc text)
message("--- configure output (COMPONENTS nosuch) ---\n${text}--- end ---")
if(rc EQUAL 0)
  message(FATAL_ERROR "configuring with COMPONENTS nosuch succeeded; it must fail")
endif()
# CMake wraps long messages; compare with the whitespace collapsed.
string(REGEX REPLACE "[ \t\r\n]+" " " flat "${text}")
foreach(expected
    "recap: component 'nosuch' was requested but is not installed."
    "Installed components: core"
    "RECAP_BUILD_NOSUCH=ON")
  string(FIND "${flat}" "${expected}" pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "the configure output does not say \"${expected}\"")
  endif()
endforeach()

configure_consumer("${BINARY_DIR}/optional" rc text -DRECAP_OPTIONAL=ON)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring with OPTIONAL_COMPONENTS nosuch failed:\n${text}")
endif()
message(STATUS "missing components are reported; optional ones are not fatal")
