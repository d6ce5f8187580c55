# cmake -DLIBRARIES="a.so|b.so" -DINCLUDE_DIR=<prefix>/include -P check_exports.cmake
#
# A shared recap library exports its public API and nothing else (issue 18). Every exported
# symbol of recap's namespace must be made of names that a public header under INCLUDE_DIR
# spells: a function, class, member or enum declared there. A private helper that leaks
# (a store rule, the body codec, a compactor internal) has a name no public header has, and
# fails the check. Instantiations of standard templates over recap's types (std::vector of
# Message, …) are the standard library's symbols, not recap's, and are not checked.
find_program(NM nm)
find_program(CXXFILT c++filt)
if(NOT NM OR NOT CXXFILT)
  message(STATUS "nm or c++filt not found; the exported symbols were not checked")
  return()
endif()

# Every identifier the public headers spell.
file(GLOB_RECURSE headers "${INCLUDE_DIR}/recap/*.h")
if(NOT headers)
  message(FATAL_ERROR "no public header under ${INCLUDE_DIR}/recap")
endif()
set(public_words)
foreach(h IN LISTS headers)
  file(READ "${h}" text)
  string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_]*" words "${text}")
  list(APPEND public_words ${words})
endforeach()
list(REMOVE_DUPLICATES public_words)

string(REPLACE "|" ";" LIBRARIES "${LIBRARIES}")
list(LENGTH LIBRARIES library_count)
message(STATUS "checking the exports of ${library_count} libraries")

set(leaks)
set(checked 0)
set(c_checked 0)
foreach(lib IN LISTS LIBRARIES)
  execute_process(COMMAND "${NM}" -D --defined-only "${lib}" OUTPUT_VARIABLE table
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm failed on ${lib}")
  endif()
  string(REGEX MATCHALL "[^\n]+" lines "${table}")
  set(mangled)
  foreach(line IN LISTS lines)
    # The C API (include/recap/c/recap.h): every function a library exports under a C name is
    # one of its recap_* functions.
    set(c_name "")
    if(line MATCHES " [TW] ([A-Za-z_][A-Za-z0-9_]*)$")
      set(c_name "${CMAKE_MATCH_1}")
    endif()
    if(c_name AND NOT c_name MATCHES "^_Z")
      if(c_name MATCHES "^recap_")
        list(FIND public_words "${c_name}" found)
        if(found EQUAL -1)
          get_filename_component(short "${lib}" NAME)
          list(APPEND leaks "${short}: ${c_name} (C)")
        endif()
        math(EXPR c_checked "${c_checked} + 1")
      elseif(NOT c_name MATCHES "^(_init|_fini)$")
        get_filename_component(short "${lib}" NAME)
        list(APPEND leaks "${short}: ${c_name} (C)")
      endif()
    endif()
    # Functions, members, vtables, type infos and statics of namespace recap (mangled
    # N5recap…, with K for a const member); standard templates start with St, not 5recap.
    if(line MATCHES " [TWVDBRtwvdbr] (_Z(N|NK|TVN|TIN|TSN|ZN|ZNK|GVN)5recap[^ ]*)$")
      list(APPEND mangled "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  if(NOT mangled)
    continue()
  endif()
  execute_process(COMMAND "${CXXFILT}" ${mangled} OUTPUT_VARIABLE demangled)
  string(REGEX MATCHALL "[^\n]+" names "${demangled}")
  foreach(name IN LISTS names)
    math(EXPR checked "${checked} + 1")
    set(qualified "${name}")
    string(REGEX REPLACE "^(vtable|typeinfo name|typeinfo|guard variable) for " "" qualified
                         "${qualified}")
    # The qualified name only: no parameter list, no template arguments.
    string(REGEX REPLACE "\\(.*$" "" qualified "${qualified}")
    string(REGEX REPLACE "<.*>" "" qualified "${qualified}")
    string(REPLACE "[abi:cxx11]" "" qualified "${qualified}")
    string(REPLACE "::" ";" parts "${qualified}")
    foreach(part IN LISTS parts)
      string(REGEX REPLACE "^~" "" part "${part}")
      if(part STREQUAL "" OR part MATCHES "^operator")
        continue()
      endif()
      list(FIND public_words "${part}" found)
      if(found EQUAL -1)
        get_filename_component(short "${lib}" NAME)
        list(APPEND leaks "${short}: ${name}")
        break()
      endif()
    endforeach()
  endforeach()
endforeach()

if(checked EQUAL 0)
  message(FATAL_ERROR "no exported recap symbol found in ${LIBRARIES}: was it built hidden?")
endif()
if(leaks)
  list(LENGTH leaks n)
  string(REPLACE ";" "\n  " shown "${leaks}")
  message(FATAL_ERROR "${n} exported symbols are not part of the public API (no public header "
                      "names them); hide them:\n  ${shown}")
endif()
message(STATUS "${checked} exported recap symbols and ${c_checked} C functions, all named by the "
               "public headers")
