# pkg-config files: lib/pkgconfig/recap-<component>.pc, for builds that do not use CMake
# (docs/packages.md):
#
#   c++ -std=c++17 host.cc $(pkg-config --cflags --libs recap-sqlite)            shared recap
#   c++ -std=c++17 host.cc $(pkg-config --static --cflags --libs recap-sqlite)   static recap
#
# Included by cmake/RecapInstall.cmake; recap_install_component(... PKGCONFIG "<description>")
# calls recap_install_pkgconfig(). Each file is written from the build's own settings, at the
# end of the component's CMakeLists (after every link it makes):
#
#   Libs          -L${libdir} and the library's real file name (OUTPUT_NAME, any postfix)
#   Cflags        -I${includedir} and the library's public compile definitions: RECAP_STATIC in
#                 a static build (include/recap/export.h)
#   Requires      the recap components it links PUBLIC (recap-core, whose headers it includes)
#   Requires.private, Libs.private
#                 the recap components it links PRIVATE; and in a static build the linker
#                 flags of every other library it links (and of what those link in turn),
#                 taken from CMake's imported targets: -lSQLiteCpp -lsqlite3 -ldl, -lcurl,
#                 -lpq, -lspdlog -lfmt; for recap-core also the C++ runtime (-lstdc++ -lm), so
#                 that a C program linked by the C compiler driver gets it. A shared library
#                 names its own dependencies (DT_NEEDED): a shared build lists no other
#                 library's, and a host's build needs no other -dev package.
#
# Why Libs.private names the libraries instead of Requires.private naming their pkg-config
# modules (libcurl, libpq, sqlite3): `pkg-config --static` then also pulls in those modules'
# own Libs.private, the flags for linking libcurl and libpq statically, which on Debian name
# libraries whose -dev packages are not installed with libcurl4-openssl-dev or libpq-dev
# (-lnghttp2, -lrtmp, -lssh2, -lpsl, -lgssapi_krb5, -lldap, -lpgcommon, …), and the link
# fails. A static recap needs those libraries linked as the CMake package links them: shared.
#
# The files are relocatable: prefix is ${pcfiledir} and the way up to the install prefix, so
# an install moved elsewhere (a Debian package unpacked into a scratch folder, a tarball) works
# without PKG_CONFIG_SYSROOT_DIR.

include_guard(GLOBAL)

set(RECAP_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
  CACHE STRING "Where recap's pkg-config files are installed, relative to the prefix")
mark_as_advanced(RECAP_INSTALL_PKGCONFIGDIR)

# recap_install_pkgconfig(<component> TARGET <target> DESCRIPTION <text>): writes and installs
# recap-<component>.pc (install component `development`) for <target>, once the project is
# configured.
function(recap_install_pkgconfig name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TARGET;DESCRIPTION" "")
  if(NOT arg_TARGET OR NOT arg_DESCRIPTION)
    message(FATAL_ERROR "recap_install_pkgconfig(${name}): TARGET and DESCRIPTION are required")
  endif()
  # $<CONFIG> in the file's name: a multi-config generator writes one per configuration, and
  # installs the one it installs.
  set(pc_file "${PROJECT_BINARY_DIR}/pkgconfig/$<CONFIG>/recap-${name}.pc")
  # At the end of the calling directory's CMakeLists, where the component is defined: its
  # target has all its links by then, and the imported targets it links (CURL::libcurl, found
  # in src/http) are visible there only. (A deferred call reads variables when it runs: EVAL
  # writes their values into it now.)
  cmake_language(EVAL CODE "
    cmake_language(DEFER
      CALL _recap_write_pkgconfig [=[${name}]=] [=[${arg_TARGET}]=] [=[${arg_DESCRIPTION}]=]
        [=[${pc_file}]=])")
  install(FILES "${pc_file}" DESTINATION "${RECAP_INSTALL_PKGCONFIGDIR}" COMPONENT development)
endfunction()

# _recap_pc_location(<out> <imported target>): the file of an imported library, for this
# build's configuration when the target has one, else for any it has.
function(_recap_pc_location out target)
  string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
  set(candidates)
  if(config)
    get_target_property(mapped ${target} MAP_IMPORTED_CONFIG_${config})
    if(mapped)
      list(APPEND candidates ${mapped})
    endif()
    list(APPEND candidates ${config})
  endif()
  get_target_property(configs ${target} IMPORTED_CONFIGURATIONS)
  if(configs)
    list(APPEND candidates ${configs})
  endif()
  foreach(c IN LISTS candidates)
    string(TOUPPER "${c}" c)
    get_target_property(location ${target} IMPORTED_LOCATION_${c})
    if(location)
      set(${out} "${location}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  get_target_property(location ${target} IMPORTED_LOCATION)
  set(${out} "${location}" PARENT_SCOPE)
endfunction()

# _recap_pc_file_flags(<out> <library file>): -l<name>, with -L<dir> when the linker does not
# search <dir> anyway; the path itself when it is not a lib<name>.so / .a.
function(_recap_pc_file_flags out file)
  get_filename_component(dir "${file}" DIRECTORY)
  get_filename_component(base "${file}" NAME)
  if(NOT base MATCHES "^lib(.+)\\.(so|a|dylib)(\\.[0-9.]+)?$")
    set(${out} "${file}" PARENT_SCOPE)
    return()
  endif()
  set(flags "-l${CMAKE_MATCH_1}")
  if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
    set(flags "-L${dir}" "${flags}")
  endif()
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# _recap_pc_link_flags(<out> <depth> <items>...): the linker flags that link <items> (entries
# of a target's link interface: imported targets, library files, names, flags), each library
# before the libraries it links. Entries only the build tree sees ($<BUILD_INTERFACE:…>, the
# private seam) are skipped.
function(_recap_pc_link_flags out depth)
  if(depth GREATER 16)
    message(FATAL_ERROR "recap: pkg-config: the link dependencies nest too deep (a cycle?): ${ARGN}")
  endif()
  math(EXPR next "${depth} + 1")
  set(flags)
  foreach(item IN LISTS ARGN)
    if(item MATCHES "^\\$<LINK_ONLY:(.*)>$")
      set(item "${CMAKE_MATCH_1}")
    endif()
    if(item STREQUAL "" OR item MATCHES "^\\$<" OR item MATCHES "^::@")
      continue()
    endif()
    if(TARGET "${item}")
      get_target_property(type "${item}" TYPE)
      get_target_property(imported "${item}" IMPORTED)
      if(NOT imported)
        message(FATAL_ERROR "recap: pkg-config: ${item}, a target of this build, is not "
          "installed; a static recap library cannot link it")
      endif()
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        _recap_pc_location(location "${item}")
        if(location)
          _recap_pc_file_flags(file_flags "${location}")
          list(APPEND flags ${file_flags})
        endif()
      endif()
      get_target_property(interface "${item}" INTERFACE_LINK_LIBRARIES)
      if(interface)
        _recap_pc_link_flags(more ${next} ${interface})
        list(APPEND flags ${more})
      endif()
    elseif(item MATCHES "::")
      message(FATAL_ERROR "recap: pkg-config: ${item} is not a target where ${ARGV0} is "
        "written; call recap_install_component() where it is found")
    elseif(item MATCHES "^-")
      list(APPEND flags "${item}")
    elseif(IS_ABSOLUTE "${item}")
      _recap_pc_file_flags(file_flags "${item}")
      list(APPEND flags ${file_flags})
    else()
      list(APPEND flags "-l${item}")
    endif()
  endforeach()
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# _recap_pc_module(<out> <item>): recap-<component> when <item> is one of recap's libraries
# (recap::sqlite, recap_sqlite, $<LINK_ONLY:recap::sqlite>), else empty.
function(_recap_pc_module out item)
  set(${out} "" PARENT_SCOPE)
  if(item MATCHES "^\\$<LINK_ONLY:(.*)>$")
    set(item "${CMAKE_MATCH_1}")
  endif()
  if(NOT item MATCHES "^recap(::|_)" OR NOT TARGET "${item}")
    return()
  endif()
  get_target_property(aliased "${item}" ALIASED_TARGET)
  if(aliased)
    set(item "${aliased}")
  endif()
  get_target_property(imported "${item}" IMPORTED)
  if(imported)
    return()
  endif()
  get_target_property(component "${item}" EXPORT_NAME)
  if(component)
    set(${out} "recap-${component}" PARENT_SCOPE)
  endif()
endfunction()

# Deferred to the end of the project's configuration (recap_install_pkgconfig()).
function(_recap_write_pkgconfig name target description pc_file)
  get_target_property(type ${target} TYPE)
  get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
  if(NOT interface)
    set(interface)
  endif()

  # A target's link interface holds its PUBLIC dependencies as they are and, for a static
  # library, its PRIVATE ones as $<LINK_ONLY:…> (the consumer links those too).
  set(requires)
  set(requires_private)
  set(public_items)
  set(private_items)
  foreach(item IN LISTS interface)
    _recap_pc_module(module "${item}")
    if(item MATCHES "^\\$<LINK_ONLY:")
      if(module)
        list(APPEND requires_private "${module} = ${PROJECT_VERSION}")
      else()
        list(APPEND private_items "${item}")
      endif()
    elseif(module)
      list(APPEND requires "${module} = ${PROJECT_VERSION}")
    else()
      list(APPEND public_items "${item}")
    endif()
  endforeach()
  _recap_pc_link_flags(libs 0 ${public_items})
  set(libs_private)
  if(NOT type STREQUAL "STATIC_LIBRARY")
    # A shared library's link interface leaves out the recap libraries it links PRIVATE
    # (librecap_c.so needs librecap_sqlite.so, …): named in Requires.private, and found by the
    # linker through -rpath-link when the host is linked (GNU ld looks for a library's own
    # DT_NEEDED libraries in the system's folders only, not in -L ones; CMake's imported
    # targets add the same flag).
    get_target_property(direct ${target} LINK_LIBRARIES)
    set(private_recap)
    foreach(item IN LISTS direct)
      _recap_pc_module(module "${item}")
      if(module AND NOT "${module} = ${PROJECT_VERSION}" IN_LIST requires)
        list(APPEND requires_private "${module} = ${PROJECT_VERSION}")
        set(private_recap ON)
      endif()
    endforeach()
    if(private_recap AND NOT APPLE AND NOT WIN32)
      list(APPEND libs "-Wl,-rpath-link,\${libdir}")
    endif()
  else()
    _recap_pc_link_flags(libs_private 0 ${private_items})
    if(name STREQUAL "core")
      # The C++ runtime, as the C++ compiler driver links it (libstdc++ and libm with GCC),
      # less what the C driver links too: recap is C++ inside, and a C host (recap-c) is
      # linked by cc.
      foreach(lib IN LISTS CMAKE_CXX_IMPLICIT_LINK_LIBRARIES)
        if(NOT lib MATCHES "^(c|gcc|gcc_s|gcc_eh)$" AND NOT lib MATCHES "[/\\\\]"
           AND NOT lib MATCHES "^-")
          list(APPEND libs_private "-l${lib}")
        endif()
      endforeach()
    endif()
  endif()
  # Each flag once, keeping its last place: a static library comes before those it needs.
  foreach(var libs libs_private)
    list(REVERSE ${var})
    list(REMOVE_DUPLICATES ${var})
    list(REVERSE ${var})
  endforeach()

  # -D for each public compile definition (RECAP_STATIC in a static build).
  get_target_property(definitions ${target} INTERFACE_COMPILE_DEFINITIONS)
  set(cflags "-I\${includedir}")
  foreach(definition IN LISTS definitions)
    if(definition AND NOT definition MATCHES "^\\$<")
      string(APPEND cflags " -D${definition}")
    endif()
  endforeach()

  # The way from the .pc file's folder up to the install prefix.
  if(IS_ABSOLUTE "${RECAP_INSTALL_PKGCONFIGDIR}")
    set(prefix "${CMAKE_INSTALL_PREFIX}")
  else()
    file(RELATIVE_PATH up "/recap-prefix/${RECAP_INSTALL_PKGCONFIGDIR}" "/recap-prefix")
    string(REGEX REPLACE "/$" "" up "${up}")
    set(prefix "\${pcfiledir}/${up}")
  endif()
  foreach(dir LIBDIR INCLUDEDIR)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
      set(${dir} "${CMAKE_INSTALL_${dir}}")
    else()
      set(${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
    endif()
  endforeach()

  if(type STREQUAL "STATIC_LIBRARY")
    set(kind "a static library")
  else()
    set(kind "a shared library")
  endif()
  list(JOIN requires ", " requires)
  list(JOIN requires_private ", " requires_private)
  list(JOIN libs " " libs)
  list(JOIN libs_private " " libs_private)
  set(content "# recap-${name}: recap ${PROJECT_VERSION}, component ${name}, ${kind}.\n")
  string(APPEND content "# Written by cmake/RecapPkgConfig.cmake from the build's settings.\n")
  string(APPEND content "prefix=${prefix}\n")
  string(APPEND content "libdir=${LIBDIR}\n")
  string(APPEND content "includedir=${INCLUDEDIR}\n\n")
  string(APPEND content "Name: recap-${name}\n")
  string(APPEND content "Description: ${description}\n")
  string(APPEND content "Version: ${PROJECT_VERSION}\n")
  if(requires)
    string(APPEND content "Requires: ${requires}\n")
  endif()
  if(requires_private)
    string(APPEND content "Requires.private: ${requires_private}\n")
  endif()
  string(APPEND content "Cflags: ${cflags}\n")
  # The library's file name as the linker sees it (lib<name>.a / .so), from the target.
  string(APPEND content "Libs: -L\${libdir} -l$<TARGET_LINKER_FILE_BASE_NAME:${target}>")
  if(libs)
    string(APPEND content " ${libs}")
  endif()
  string(APPEND content "\n")
  if(libs_private)
    string(APPEND content "Libs.private: ${libs_private}\n")
  endif()
  file(GENERATE OUTPUT "${pc_file}" CONTENT "${content}")
endfunction()
