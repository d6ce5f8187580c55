# Install rules and the package config that supports COMPONENTS.
#
# Included by the top-level CMakeLists.txt when RECAP_INSTALL is on (the default only when
# recap is the top-level project). The installed tree looks like this:
#
#   include/recap/*.h                                core headers
#   include/recap/<component>/*.h                    a component's headers (sqlite, http, …)
#   lib/librecap_core.a | .so.0.1                    one library per component
#   lib/cmake/recap/recapConfig.cmake                loads core, then the requested components
#   lib/cmake/recap/recapConfigVersion.cmake         SameMinorVersion in 0.x, then SameMajorVersion
#   lib/cmake/recap/recap-<c>-targets.cmake          imported targets recap::<c>
#   lib/cmake/recap/recap-<c>-dependencies.cmake     find_dependency() calls component <c> needs
#   lib/pkgconfig/recap-<c>.pc                       pkg-config files (cmake/RecapPkgConfig.cmake)
#
# A consumer writes `find_package(recap CONFIG REQUIRED COMPONENTS core sqlite)`. Which
# components are installed is discovered by the config at find time (by globbing
# recap-*-targets.cmake), so asking for one that was not built fails with a message naming
# the installed ones.
#
# Adding a component (say sqlite) takes one call, placed after this file was included (the
# top-level CMakeLists, or the component's own CMakeLists when it is added later):
#
#   recap_install_component(sqlite
#     TARGETS recap_sqlite
#     DEPENDENCIES "find_dependency(SQLiteCpp)\nfind_dependency(SQLite3)")
#
# Its headers are taken from include/recap/<name>/ when that folder exists; they install
# under the same include/ as core's, which a component target reaches by linking recap::core
# PUBLIC (or by its own $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>). A component's
# targets may link recap::core: each export set references the others by their namespaced
# names, and the config always loads core first. With PKGCONFIG "<description>" the component
# also gets a pkg-config file, recap-<name>.pc (cmake/RecapPkgConfig.cmake).
#
# Every install rule names the install component (the CPack component, one Debian package
# each: cmake/RecapPackaging.cmake) its files belong to:
#
#   libraries     the shared libraries a program loads (librecap_core.so.0.1, …)
#   development   headers, static libraries, the .so links, the CMake and pkg-config files
#   command       the recap command (src/cli)
#   python        the Python module (python/)
#
# so that `cmake --install <build> --component development` installs what building against
# recap needs, and nothing else.

include_guard(GLOBAL)

include(CMakePackageConfigHelpers)
include(GNUInstallDirs)
include(RecapPkgConfig)

set(RECAP_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/recap"
  CACHE STRING "Where recap's CMake package files are installed, relative to the prefix")
mark_as_advanced(RECAP_INSTALL_CMAKEDIR)

# Sub-folders of include/recap/ that belong to optional components. Their headers are
# installed by recap_install_component() with the component, never with core, so an install
# never carries headers of a library it does not have.
set(RECAP_COMPONENT_HEADER_DIRS sqlite http postgres testing c)

# recap_install_component(<name> TARGETS <targets...> [DEPENDENCIES "<cmake code>"]
#                         [HEADERS_DIR <dir>] [PKGCONFIG "<description>"])
#
# Installs <targets> with the export set recap-<name> (NAMESPACE recap::) into
# recap-<name>-targets.cmake, writes recap-<name>-dependencies.cmake from DEPENDENCIES (CMake
# code, normally find_dependency() lines, run before the targets file is loaded; the config
# has already included CMakeFindDependencyMacro), and installs the component's headers from
# HEADERS_DIR (default: include/recap/<name> when it exists). PKGCONFIG writes recap-<name>.pc
# for the first of <targets>, with <description> as its Description.
function(recap_install_component name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "DEPENDENCIES;HEADERS_DIR;PKGCONFIG" "TARGETS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "recap_install_component(${name}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_TARGETS)
    message(FATAL_ERROR "recap_install_component(${name}): TARGETS is required")
  endif()
  if(NOT name MATCHES "^[a-z][a-z0-9_]*$")
    message(FATAL_ERROR "recap_install_component: component name '${name}' must be lower-case "
      "letters, digits and '_' (it becomes recap::${name} and recap-${name}-targets.cmake)")
  endif()

  # A shared library's file and its SONAME link are what a program loads (libraries); the
  # unversioned .so link, like a static library, is only for building against it (development).
  install(TARGETS ${arg_TARGETS}
    EXPORT recap-${name}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT libraries
      NAMELINK_COMPONENT development
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT libraries)
  install(EXPORT recap-${name}
    NAMESPACE recap::
    FILE recap-${name}-targets.cmake
    DESTINATION ${RECAP_INSTALL_CMAKEDIR}
    COMPONENT development)

  set(deps_file "${PROJECT_BINARY_DIR}/cmake/recap-${name}-dependencies.cmake")
  string(CONFIGURE [[
# Dependencies of recap component '@name@', loaded by recapConfig.cmake before
# recap-@name@-targets.cmake. Generated by cmake/RecapInstall.cmake; do not edit.
@arg_DEPENDENCIES@
]] deps_content @ONLY)
  file(GENERATE OUTPUT "${deps_file}" CONTENT "${deps_content}")
  install(FILES "${deps_file}" DESTINATION ${RECAP_INSTALL_CMAKEDIR} COMPONENT development)

  if(NOT DEFINED arg_HEADERS_DIR AND IS_DIRECTORY "${PROJECT_SOURCE_DIR}/include/recap/${name}")
    set(arg_HEADERS_DIR "${PROJECT_SOURCE_DIR}/include/recap/${name}")
  endif()
  if(arg_HEADERS_DIR)
    install(DIRECTORY "${arg_HEADERS_DIR}/"
      DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/recap/${name}"
      COMPONENT development
      FILES_MATCHING PATTERN "*.h")
  endif()

  if(DEFINED arg_PKGCONFIG)
    list(GET arg_TARGETS 0 pc_target)
    recap_install_pkgconfig(${name} TARGET ${pc_target} DESCRIPTION "${arg_PKGCONFIG}")
  endif()

  set_property(GLOBAL APPEND PROPERTY RECAP_INSTALLED_COMPONENTS ${name})
endfunction()

# --- core ----------------------------------------------------------------------------------

# Core headers: everything under include/recap/ except the folders of optional components.
set(_recap_header_excludes)
foreach(dir IN LISTS RECAP_COMPONENT_HEADER_DIRS)
  list(APPEND _recap_header_excludes PATTERN "${dir}" EXCLUDE)
endforeach()
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/recap/"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/recap"
  COMPONENT development
  FILES_MATCHING PATTERN "*.h" ${_recap_header_excludes})
unset(_recap_header_excludes)

# What the exported recap::core references besides itself. A shared library hides its
# private dependencies, so a consumer needs nothing. A static one cannot: its exported
# INTERFACE_LINK_LIBRARIES carry $<LINK_ONLY:…> entries for every PRIVATE dependency, and the
# consumer's CMake must know those targets to link them. spdlog's own config finds fmt.
get_target_property(_recap_core_type recap_core TYPE)
if(_recap_core_type STREQUAL "STATIC_LIBRARY")
  set(_recap_core_dependencies [[
# recap::core is a static library: its private dependencies are linked by the consumer.
find_dependency(nlohmann_json 3.10)
find_dependency(spdlog)
find_dependency(Threads)
]])
else()
  set(_recap_core_dependencies "# recap::core is a shared library: nothing to find.")
endif()
recap_install_component(core
  TARGETS recap_core
  DEPENDENCIES "${_recap_core_dependencies}"
  PKGCONFIG "recap's core: keeps an LLM agent's conversation inside its context window")
unset(_recap_core_dependencies)
unset(_recap_core_type)

# --- package config ------------------------------------------------------------------------

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/recapConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/cmake/recapConfig.cmake"
  INSTALL_DESTINATION "${RECAP_INSTALL_CMAKEDIR}"
  NO_SET_AND_CHECK_MACRO)
# docs/compatibility.md: in 0.x a minor release may break the API, so find_package(recap 0.1)
# accepts 0.1.x only; from 1.0 on, any 1.y.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_recap_compatibility SameMinorVersion)
else()
  set(_recap_compatibility SameMajorVersion)
endif()
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/cmake/recapConfigVersion.cmake"
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY ${_recap_compatibility})
unset(_recap_compatibility)
install(FILES
  "${PROJECT_BINARY_DIR}/cmake/recapConfig.cmake"
  "${PROJECT_BINARY_DIR}/cmake/recapConfigVersion.cmake"
  DESTINATION "${RECAP_INSTALL_CMAKEDIR}"
  COMPONENT development)
