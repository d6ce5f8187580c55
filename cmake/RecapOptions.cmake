# Compiler settings shared by every recap target.

# recap_set_target_defaults(<target>): warnings, hidden visibility, sanitizers.
function(recap_set_target_defaults target)
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
      -Wno-sign-conversion)
  endif()
  # A shared library resolves every symbol at link time: an adapter that needs something the
  # core keeps hidden fails to link here, not when a host loads it.
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND NOT RECAP_SANITIZE AND NOT RECAP_SANITIZE_THREAD)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "SHARED_LIBRARY")
      target_link_options(${target} PRIVATE -Wl,--no-undefined)
    endif()
  endif()
endfunction()

if(RECAP_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "RECAP_SANITIZE needs GCC or Clang")
  endif()
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

if(RECAP_SANITIZE_THREAD)
  if(RECAP_SANITIZE)
    message(FATAL_ERROR "RECAP_SANITIZE_THREAD and RECAP_SANITIZE cannot be combined: "
      "ThreadSanitizer and AddressSanitizer need separate builds")
  endif()
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "RECAP_SANITIZE_THREAD needs GCC or Clang")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()
