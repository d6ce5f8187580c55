// Private: how every entry point of the C API answers. Each one runs its body inside Guard(),
// which turns a Status into the C code and a malloc'd message, and any exception into
// RECAP_RESOURCE_EXHAUSTED (std::bad_alloc) or RECAP_INTERNAL: nothing C++ crosses the
// boundary. Guard() is a template, defined here; the rest is defined in capi_errors.cc.
#ifndef RECAP_SRC_C_CAPI_GUARD_H_
#define RECAP_SRC_C_CAPI_GUARD_H_

#include <exception>
#include <new>
#include <optional>
#include <string>
#include <string_view>

#include "recap/c/recap.h"
#include "recap/recap.h"

namespace recap {
namespace capi {

// A copy of `text` the caller frees with recap_free; null when memory ran out.
char* Dup(std::string_view text) noexcept;

// A Status as the C API's error: its message with its remedies said in the C API's words
// (CWords), which recap_last_error_remedies then lists. Returns its code.
int Fail(char** error, const recap::Status& status) noexcept;
// A remedy in the words of the C API (its JSON members, what recap_store_open takes), or
// nothing for the C++ API's words. docs/errors.md has the table.
std::optional<std::string> CWords(const recap::Remedy& r);
// recap_last_error_remedies.
char* LastRemedies() noexcept;
int Fail(char** error, int code, const char* message) noexcept;

// Runs `body` (returning a C code) so that no exception leaves the C API.
template <typename Body>
int Guard(const char* function, char** error, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(error, RECAP_RESOURCE_EXHAUSTED, "recap: out of memory");
  } catch (const std::exception& e) {
    try {
      return Fail(error, recap::Status::Internal(std::string(function) +
                                                 ": unexpected exception (a bug in recap; "
                                                 "please report it): " +
                                                 e.what()));
    } catch (...) {
      return Fail(error, RECAP_INTERNAL, "recap: unexpected exception (a bug in recap)");
    }
  } catch (...) {
    return Fail(error, RECAP_INTERNAL, "recap: unexpected exception (a bug in recap)");
  }
}

// Hands a result string to the caller, or fails for lack of memory.
int Give(std::string_view text, char** out, char** error) noexcept;

// The checks every entry point makes of its pointers, as a message that names the function
// and the parameter.
recap::Status Missing(const char* function, const char* parameter);

// `text` as a JSON string (invalid UTF-8 replaced), for a message or a JSON text.
std::string JsonString(std::string_view text);

}  // namespace capi
}  // namespace recap

#endif  // RECAP_SRC_C_CAPI_GUARD_H_
