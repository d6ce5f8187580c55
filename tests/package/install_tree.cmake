# cmake -DBUILD_DIR=… -DPREFIX=… [-DCONFIG=…] [-DEXPECT_PROGRAM=recap] [-DCLEAN_DIRS=a;b]
#       -P install_tree.cmake
#
# Installs the build tree BUILD_DIR into a fresh PREFIX, and removes CLEAN_DIRS (build trees
# of consumers of an earlier install, whose caches would point at stale files). With
# EXPECT_PROGRAM, checks that the program was installed into bin/ and runs.
foreach(var BUILD_DIR PREFIX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_tree.cmake: ${var} is not set")
  endif()
endforeach()

file(REMOVE_RECURSE "${PREFIX}")
foreach(dir IN LISTS CLEAN_DIRS)
  file(REMOVE_RECURSE "${dir}")
endforeach()

set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()
execute_process(
  COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${config_args}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${PREFIX} failed (${rc})")
endif()

# What a consumer relies on.
include(GNUInstallDirs)
file(GLOB config_dirs "${PREFIX}/lib*/cmake/recap")
if(NOT config_dirs)
  message(FATAL_ERROR "no lib*/cmake/recap directory under ${PREFIX}")
endif()
list(GET config_dirs 0 config_dir)
foreach(file recapConfig.cmake recapConfigVersion.cmake recap-core-targets.cmake
             recap-core-dependencies.cmake)
  if(NOT EXISTS "${config_dir}/${file}")
    message(FATAL_ERROR "${config_dir}/${file} was not installed")
  endif()
endforeach()
# The pkg-config files (cmake/RecapPkgConfig.cmake), one per component with a library.
file(GLOB pc_files "${PREFIX}/lib*/pkgconfig/recap-core.pc" "${PREFIX}/lib*/*/pkgconfig/recap-core.pc")
if(NOT pc_files)
  message(FATAL_ERROR "no pkgconfig/recap-core.pc under ${PREFIX}")
endif()
foreach(header recap.h message.h transcript.h export.h version.h)
  if(NOT EXISTS "${PREFIX}/include/recap/${header}")
    message(FATAL_ERROR "include/recap/${header} was not installed")
  endif()
endforeach()
if(EXPECT_PROGRAM)
  set(program "${PREFIX}/${CMAKE_INSTALL_BINDIR}/${EXPECT_PROGRAM}")
  if(NOT EXISTS "${program}")
    message(FATAL_ERROR "${CMAKE_INSTALL_BINDIR}/${EXPECT_PROGRAM} was not installed")
  endif()
  execute_process(COMMAND "${program}" version RESULT_VARIABLE rc OUTPUT_VARIABLE out)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "^recap [0-9]")
    message(FATAL_ERROR "the installed ${program} does not run: exit ${rc}, printed '${out}'")
  endif()
endif()
message(STATUS "recap installed into ${PREFIX}")
