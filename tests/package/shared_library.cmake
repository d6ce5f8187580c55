# cmake -DRECAP_SOURCE_DIR=… -DCONSUMER_DIR=… -DWORK_DIR=… -DGENERATOR=… [-DCONFIG=…]
#       [-DTOOLCHAIN_ARGS=…] -P shared_library.cmake
#
# Builds recap as shared libraries from source (no tests, no examples; the command and the
# Python module too), installs it, then builds and runs the find_package consumer against it
# and checks that the consumer really loads librecap_core.so from that install. It also checks
# that the installed libraries export only the public API (check_exports.cmake).
#
# The one shared build of the package tests (fixture recap_shared_built): the pkg-config
# hosts are built against its install (package.issue42_pkgconfig_shared), and the Debian packages are
# made from it (package.issue42_debian). So it is configured as the packages are built
# (docs/packages.md): for the prefix /usr (the libraries in lib/<multiarch>) with the Python
# module in lib/python3/dist-packages; `cmake --install --prefix` puts it elsewhere here.
set(build "${WORK_DIR}/recap-build")
set(prefix "${WORK_DIR}/prefix")
set(consumer "${WORK_DIR}/consumer-build")
file(REMOVE_RECURSE "${prefix}" "${consumer}")

function(run)
  string(REPLACE ";" " " shown "${ARGN}")
  message(STATUS "$ ${shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${shown}")
  endif()
endfunction()

set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()

# Configured afresh each run (what was compiled stays): a cache of an earlier run keeps values
# this script no longer gives, such as folders derived from another prefix.
file(REMOVE "${build}/CMakeCache.txt")
run("${CMAKE_COMMAND}" -S "${RECAP_SOURCE_DIR}" -B "${build}" -G "${GENERATOR}" ${TOOLCHAIN_ARGS}
    -DBUILD_SHARED_LIBS=ON -DRECAP_BUILD_TESTS=OFF -DRECAP_BUILD_EXAMPLES=OFF -DRECAP_INSTALL=ON
    -DCMAKE_INSTALL_PREFIX=/usr -DRECAP_PYTHON_INSTALL_DIR=lib/python3/dist-packages)
run("${CMAKE_COMMAND}" --build "${build}" ${config_args})
run("${CMAKE_COMMAND}" --install "${build}" --prefix "${prefix}" ${config_args})

# (lib/ or lib/<multiarch>/: the prefix /usr has Debian's.)
file(GLOB shared_libs "${prefix}/lib*/librecap_core.so*" "${prefix}/lib*/*/librecap_core.so*"
     "${prefix}/lib*/librecap_core*.dylib")
if(NOT shared_libs)
  message(FATAL_ERROR "no librecap_core shared library under ${prefix}")
endif()
file(GLOB static_libs "${prefix}/lib*/librecap_core.a" "${prefix}/lib*/*/librecap_core.a")
if(static_libs)
  message(FATAL_ERROR "a shared build installed a static library: ${static_libs}")
endif()

# The libraries export the public API and nothing else.
# (Joined with '|': a ';' list would reach the script as separate words, and only its first
# library would be checked.)
file(GLOB installed_libs "${prefix}/lib*/librecap_*.so" "${prefix}/lib*/*/librecap_*.so")
list(LENGTH installed_libs installed_count)
if(installed_count LESS 5)
  message(FATAL_ERROR "expected the five recap libraries (core, sqlite, http, postgres, c) under "
                      "${prefix}, found: ${installed_libs}")
endif()
string(JOIN "|" installed_list ${installed_libs})
run("${CMAKE_COMMAND}" "-DLIBRARIES=${installed_list}" "-DINCLUDE_DIR=${prefix}/include"
    -P "${CMAKE_CURRENT_LIST_DIR}/check_exports.cmake")

run("${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${consumer}" -G "${GENERATOR}" ${TOOLCHAIN_ARGS}
    "-DCMAKE_PREFIX_PATH=${prefix}" -DRECAP_EXPECT_TYPE=SHARED_LIBRARY)
run("${CMAKE_COMMAND}" --build "${consumer}" ${config_args})

file(GLOB_RECURSE exe "${consumer}/recap_consumer" "${consumer}/recap_consumer.exe")
if(NOT exe)
  message(FATAL_ERROR "recap_consumer was not built")
endif()
list(GET exe 0 exe)
run("${exe}")

# The executable must load the installed shared library (not a static copy linked in).
find_program(LDD ldd)
if(LDD)
  execute_process(COMMAND "${LDD}" "${exe}" OUTPUT_VARIABLE deps RESULT_VARIABLE rc)
  message(STATUS "ldd ${exe}:\n${deps}")
  file(REAL_PATH "${prefix}" real_prefix)
  if(NOT deps MATCHES "librecap_core\\.so[^ ]* => ([^ ]+)")
    message(FATAL_ERROR "recap_consumer does not load librecap_core.so")
  endif()
  file(REAL_PATH "${CMAKE_MATCH_1}" loaded)
  string(FIND "${loaded}" "${real_prefix}/" pos)
  if(NOT pos EQUAL 0)
    message(FATAL_ERROR "recap_consumer loads ${loaded}, not the library installed in ${prefix}")
  endif()
  message(STATUS "recap_consumer loads ${loaded}")
else()
  message(STATUS "ldd not found; the imported target's type was checked at configure time")
endif()
