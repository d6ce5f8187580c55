# Debian packages and a tarball of the install, made by CPack (docs/packages.md):
#
#   cmake -S . -B build-deb -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
#         -DCMAKE_INSTALL_PREFIX=/usr -DRECAP_PYTHON_INSTALL_DIR=lib/python3/dist-packages
#   cmake --build build-deb
#   cd build-deb && cpack          # the .deb files and recap-<version>-Linux.tar.gz
#
# One Debian package per install component (cmake/RecapInstall.cmake says which file is in
# which), named as Debian names such packages:
#
#   librecap0.1     libraries    the shared libraries, librecap_*.so.0.1 (a shared build only:
#                                the name carries the SONAME's version, RECAP_SOVERSION)
#   librecap-dev    development  headers, the .so links (or the static libraries), the CMake
#                                package and the pkg-config files
#   recap           command      the recap command, `recap proxy` included
#   python3-recap   python       the Python module
#
# and one tarball (TGZ) of the whole install, as `cmake --install` makes it. Each package has
# the copyright file (LICENSE) and a Debian changelog in usr/share/doc/<package>/; those two
# are installed for a package only (EXCLUDE_FROM_ALL), never by `cmake --install` nor into the
# tarball. Dependencies on other Debian packages come from dpkg-shlibdeps (the libraries each
# ELF file needs); those between recap's own packages are written below, at the same version.
#
# Included at the end of the top-level CMakeLists.txt when recap is the top-level project with
# install rules: a host that vendors recap packages itself, and one `include(CPack)` per build
# is all CPack allows. tests/package/debian_packages.sh (ctest package.issue42_debian) builds
# the packages from a shared build, installs them into a scratch folder, uses them there and
# runs lintian.

include_guard(GLOBAL)

set(RECAP_PACKAGE_MAINTAINER "recap authors <recap@example.org>" CACHE STRING
  "The Debian packages' Maintainer: a name and an e-mail address")
set(RECAP_PACKAGE_RELEASE "1" CACHE STRING
  "The Debian revision of the packages (their version is <recap version>-<this>)")

# What this build has: the shared libraries make a package of their own; without them (a
# static build) the development package holds the static libraries and the command and the
# Python module carry recap inside.
get_target_property(_recap_pkg_core_type recap_core TYPE)
if(_recap_pkg_core_type STREQUAL "SHARED_LIBRARY")
  set(_recap_pkg_shared ON)
else()
  set(_recap_pkg_shared OFF)
endif()
set(_recap_pkg_version "${PROJECT_VERSION}-${RECAP_PACKAGE_RELEASE}")
set(_recap_pkg_libraries "librecap${RECAP_SOVERSION}")

set(CPACK_PACKAGE_NAME recap)
set(CPACK_PACKAGE_VENDOR "the recap authors")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGE_CONTACT "${RECAP_PACKAGE_MAINTAINER}")
set(CPACK_GENERATOR DEB TGZ)
# The packages carry no debug information (a RelWithDebInfo build's is stripped), as Debian
# ships binaries.
set(CPACK_STRIP_FILES ON)

# --- the tarball: the whole install in one archive, as `cmake --install` lays it out -------
set(CPACK_ARCHIVE_COMPONENT_INSTALL OFF)
# (`cpack --config CPackSourceConfig.cmake`, the source tarball, would otherwise take the build
# folders inside the checkout with it: what .gitignore leaves out, it leaves out.)
set(CPACK_SOURCE_IGNORE_FILES "/\\.git/" "/build[^/]*/" "/out/" "/\\.cache/"
  "\\.db(-wal|-shm)?$")
# Every CPACK_ value written into CPack's configuration as it is here (the regular expressions
# above keep their backslashes).
set(CPACK_VERBATIM_VARIABLES ON)

# --- the Debian packages: one per component ------------------------------------------------
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL development)
if(_recap_pkg_shared)
  list(PREPEND CPACK_COMPONENTS_ALL libraries)
endif()
if(TARGET recap_cli)
  list(APPEND CPACK_COMPONENTS_ALL command)
endif()
if(TARGET recap_python_c)
  list(APPEND CPACK_COMPONENTS_ALL python)
endif()

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <package>_<version>_<architecture>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE "${RECAP_PACKAGE_RELEASE}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${RECAP_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SOURCE recap)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The control files with the permissions Debian wants (lintian checks them).
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Dependencies on the system's libraries (libcurl4, libpq5, libsqlite3-0, libstdc++6, …), from
# what each ELF file needs. recap's own libraries are found in this build tree (they are in no
# installed package yet: --ignore-missing-info, which CPack passes, lets that be); the
# packages' dependencies on librecap0.1 are written below.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(_recap_pkg_private_dirs)
foreach(_recap_pkg_target IN ITEMS recap_core recap_sqlite recap_http recap_postgres recap_c)
  if(TARGET ${_recap_pkg_target})
    get_target_property(_recap_pkg_dir ${_recap_pkg_target} BINARY_DIR)
    list(APPEND _recap_pkg_private_dirs "${_recap_pkg_dir}")
  endif()
endforeach()
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${_recap_pkg_private_dirs})
# A shlibs file for each package with versioned shared libraries (librecap0.1): it tells
# dpkg-shlibdeps, for a program built against them, which package and version to depend on.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

# Each package's description (CPACK_DEBIAN_<COMPONENT>_DESCRIPTION): its synopsis line, then
# the long description, which CPack indents as the control file wants.

# librecap0.1: the shared libraries. The dynamic linker's cache is rebuilt through dpkg's
# ldconfig trigger (CPack also writes a postinst and a postrm that run ldconfig: see the
# lintian tags of docs/packages.md).
set(CPACK_DEBIAN_LIBRARIES_PACKAGE_NAME "${_recap_pkg_libraries}")
set(CPACK_DEBIAN_LIBRARIES_PACKAGE_SECTION libs)
file(WRITE "${PROJECT_BINARY_DIR}/packaging/libraries/triggers" "activate-noawait ldconfig\n")
set(CPACK_DEBIAN_LIBRARIES_PACKAGE_CONTROL_EXTRA
  "${PROJECT_BINARY_DIR}/packaging/libraries/triggers")
set(CPACK_DEBIAN_LIBRARIES_DESCRIPTION
  "fits an LLM agent's conversation into its context window - libraries
recap keeps the conversation of an agent built on a large language model
inside the model's context window: it measures each request, and when the
conversation grows too large it replaces its oldest part with a structured
checkpoint, keeping tool calls with their results and the newest turns as
they were.
.
This package holds the shared libraries: the core, the SQLite and
PostgreSQL session stores, the HTTP summarizer providers and the C API.")

# librecap-dev: what building against recap needs.
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME librecap-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
if(_recap_pkg_shared)
  set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS "${_recap_pkg_libraries} (= ${_recap_pkg_version})")
  set(_recap_pkg_dev_what "headers, the .so links")
else()
  # A static library's dependencies are linked by its consumer: the -dev packages of the
  # libraries the installed CMake package finds (find_dependency) and the pkg-config files
  # name, for each component this build has.
  set(_recap_pkg_dev_depends nlohmann-json3-dev libspdlog-dev)
  if(TARGET recap_sqlite)
    list(APPEND _recap_pkg_dev_depends libsqlitecpp-dev libsqlite3-dev)
  endif()
  if(TARGET recap_http)
    list(APPEND _recap_pkg_dev_depends "libcurl4-openssl-dev | libcurl-dev")
  endif()
  if(TARGET recap_postgres)
    list(APPEND _recap_pkg_dev_depends libpq-dev)
  endif()
  if(TARGET recap_testing)
    list(APPEND _recap_pkg_dev_depends catch2)
  endif()
  list(JOIN _recap_pkg_dev_depends ", " CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS)
  set(_recap_pkg_dev_what "headers, the static libraries")
endif()
set(CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION
  "fits an LLM agent's conversation into its context window - development
recap keeps the conversation of an agent built on a large language model
inside the model's context window.
.
This package holds what building a program with recap needs: the
${_recap_pkg_dev_what}, the CMake package (find_package(recap
COMPONENTS ...)) and the pkg-config files (recap-core, recap-sqlite,
recap-http, recap-postgres, recap-c).")

# recap: the command.
set(CPACK_DEBIAN_COMMAND_PACKAGE_NAME recap)
set(CPACK_DEBIAN_COMMAND_PACKAGE_SECTION utils)
if(_recap_pkg_shared)
  set(CPACK_DEBIAN_COMMAND_PACKAGE_DEPENDS "${_recap_pkg_libraries} (= ${_recap_pkg_version})")
endif()
set(CPACK_DEBIAN_COMMAND_DESCRIPTION
  "fits an LLM agent's conversation into its context window - command
recap keeps the conversation of an agent built on a large language model
inside the model's context window.
.
This package holds the recap command: it imports transcripts into a
session database, shows where a compaction would cut, compacts, exports
what a model would now receive, reports a session's timeline as a web
page, and serves agents that cannot link recap as an HTTP proxy in front
of their model's API (recap proxy).")

# python3-recap: the Python module (ctypes over the C API; no extension module, so it is the
# same for every Python 3).
set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-recap)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(_recap_pkg_python_depends "python3 (>= 3.8)")
if(_recap_pkg_shared)
  string(PREPEND _recap_pkg_python_depends "${_recap_pkg_libraries} (= ${_recap_pkg_version}), ")
endif()
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "${_recap_pkg_python_depends}")
set(CPACK_DEBIAN_PYTHON_DESCRIPTION
  "fits an LLM agent's conversation into its context window - Python 3
recap keeps the conversation of an agent built on a large language model
inside the model's context window.
.
This package holds the Python module recap: the compactor, the session
stores, the summarizers (recap's own, its HTTP ones, or a Python function)
and the events, over recap's C API.")

# --- usr/share/doc/<package>/: copyright and changelog --------------------------------------
# Debian wants both in every package. The changelog is a Debian one (a package's history, not
# recap's: that is CHANGELOG.md, shipped beside it as changelog.gz), compressed with gzip -9n
# as Debian's own tools do; the date honours SOURCE_DATE_EPOCH.
find_program(RECAP_GZIP gzip)
mark_as_advanced(RECAP_GZIP)
set(_recap_pkg_docs "${PROJECT_BINARY_DIR}/packaging")
string(TIMESTAMP _recap_pkg_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(WRITE "${_recap_pkg_docs}/changelog.Debian"
  "recap (${_recap_pkg_version}) unstable; urgency=medium\n\n"
  "  * recap ${PROJECT_VERSION}, packaged with CPack (cmake/RecapPackaging.cmake).\n"
  "    What the release holds: usr/share/doc/<package>/changelog.gz.\n\n"
  " -- ${RECAP_PACKAGE_MAINTAINER}  ${_recap_pkg_date}\n")
set(_recap_pkg_doc_files)
if(RECAP_GZIP)
  execute_process(COMMAND "${RECAP_GZIP}" -9nc "${_recap_pkg_docs}/changelog.Debian"
    OUTPUT_FILE "${_recap_pkg_docs}/changelog.Debian.gz" RESULT_VARIABLE _recap_pkg_rc)
  if(_recap_pkg_rc EQUAL 0)
    list(APPEND _recap_pkg_doc_files "${_recap_pkg_docs}/changelog.Debian.gz")
  endif()
  if(EXISTS "${PROJECT_SOURCE_DIR}/CHANGELOG.md")
    execute_process(COMMAND "${RECAP_GZIP}" -9nc "${PROJECT_SOURCE_DIR}/CHANGELOG.md"
      OUTPUT_FILE "${_recap_pkg_docs}/changelog.gz" RESULT_VARIABLE _recap_pkg_rc)
    if(_recap_pkg_rc EQUAL 0)
      list(APPEND _recap_pkg_doc_files "${_recap_pkg_docs}/changelog.gz")
    endif()
  endif()
else()
  message(STATUS "recap: gzip not found: the Debian packages will have no changelog")
endif()
foreach(_recap_pkg_component IN LISTS CPACK_COMPONENTS_ALL)
  string(TOUPPER "${_recap_pkg_component}" _recap_pkg_upper)
  set(_recap_pkg_name "${CPACK_DEBIAN_${_recap_pkg_upper}_PACKAGE_NAME}")
  set(_recap_pkg_doc_dir "${CMAKE_INSTALL_DATAROOTDIR}/doc/${_recap_pkg_name}")
  install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" DESTINATION "${_recap_pkg_doc_dir}"
    RENAME copyright COMPONENT ${_recap_pkg_component} EXCLUDE_FROM_ALL)
  install(FILES ${_recap_pkg_doc_files} DESTINATION "${_recap_pkg_doc_dir}"
    COMPONENT ${_recap_pkg_component} EXCLUDE_FROM_ALL)
endforeach()

include(CPack)

unset(_recap_pkg_core_type)
unset(_recap_pkg_shared)
unset(_recap_pkg_version)
unset(_recap_pkg_libraries)
unset(_recap_pkg_private_dirs)
unset(_recap_pkg_target)
unset(_recap_pkg_dir)
unset(_recap_pkg_dev_depends)
unset(_recap_pkg_dev_what)
unset(_recap_pkg_python_depends)
unset(_recap_pkg_docs)
unset(_recap_pkg_date)
unset(_recap_pkg_doc_files)
unset(_recap_pkg_rc)
unset(_recap_pkg_component)
unset(_recap_pkg_upper)
unset(_recap_pkg_name)
unset(_recap_pkg_doc_dir)
