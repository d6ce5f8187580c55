// The C API's errors and the memory it hands to the caller: a code's name, the library's
// version, recap_free, and the helpers every entry point answers with (capi_guard.h).
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "recap/c/recap.h"
#include "recap/recap.h"

#include "capi_guard.h"

namespace recap {
namespace capi {

namespace {

using Json = nlohmann::ordered_json;

}  // namespace

char* Dup(std::string_view text) noexcept {
  char* p = static_cast<char*>(std::malloc(text.size() + 1));
  if (p == nullptr) return nullptr;
  if (!text.empty()) std::memcpy(p, text.data(), text.size());
  p[text.size()] = '\0';
  return p;
}

int Fail(char** error, const recap::Status& status) noexcept {
  if (error != nullptr) *error = Dup(status.message());
  return static_cast<int>(status.code());
}

int Fail(char** error, int code, const char* message) noexcept {
  if (error != nullptr) *error = Dup(message);
  return code;
}

int Give(std::string_view text, char** out, char** error) noexcept {
  char* copy = Dup(text);
  if (copy == nullptr) return Fail(error, RECAP_RESOURCE_EXHAUSTED, "recap: out of memory");
  *out = copy;
  return RECAP_OK;
}

recap::Status Missing(const char* function, const char* parameter) {
  return recap::Status::InvalidArgument(std::string(function) + ": `" + parameter + "` is NULL");
}

std::string JsonString(std::string_view text) {
  return Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace capi
}  // namespace recap

extern "C" {

const char* recap_code_name(int code) {
  if (code < RECAP_OK || code > RECAP_INTERNAL) return "unknown";
  return recap::StatusCodeName(static_cast<recap::StatusCode>(code));
}

const char* recap_version(void) { return recap::LibraryVersion(); }

void recap_free(void* p) { std::free(p); }

}  // extern "C"
