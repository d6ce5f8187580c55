// The C API's errors and the memory it hands to the caller: a code's name, the library's
// version, recap_free, and the helpers every entry point answers with (capi_guard.h).
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

namespace {

// The remedies of the last error message a call on this thread returned
// (recap_last_error_remedies), where that message says them.
thread_local std::vector<recap::Remedy> last_remedies;

// An HTTP option as the member of recap_provider_new_http's JSON that sets it: "base_url" is
// "baseUrl".
std::string Member(const std::string& option) {
  std::string out = "\"";
  bool upper = false;
  for (char c : option) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    upper = false;
  }
  return out + "\"";
}

}  // namespace

std::optional<std::string> CWords(const recap::Remedy& r) {
  const std::string option = "HttpProviderOptions.";
  if (r.id == "HttpProviderOptions.max_retries")
    return "; " + Member("max_retries") + ": " + r.value;
  if (r.id == "HttpProviderOptions.max_retry_delay_ms") {
    return Member("max_retry_delay_ms") + ": " + r.value;
  }
  if (r.id.rfind(option, 0) == 0) return Member(r.id.substr(option.size()));
  if (r.id == "http.allow_insecure_http") return Member("allow_insecure_http") + ": true";
  if (r.id == "http.api_key") {
    return "(" + Member("api_key") + " or the variable named by " + Member("api_key_env") + ")";
  }
  // The stores recap_store_open opens take only a path or a URL: their settings are recap's.
  if (r.id == "sqlite.busy_timeout_ms") {
    return "the store waits for a lock (" + r.value + " ms); retry when the other writer is done";
  }
  if (r.id == "PostgresStoreOptions.statement_timeout_ms") return std::string("the server allows");
  if (r.id == "postgres.raise_statement_timeout" || r.id == "postgres.lower_pool_size") {
    return std::string();
  }
  if (r.id == "postgres.credentials" || r.id == "postgres.dbname") {
    return std::string("in the URL given to recap_store_open");
  }
  if (r.id == "postgres.other_schema") {
    return std::string(
        "give recap_store_open another database (recap keeps its tables in schema \"recap\")");
  }
  return std::nullopt;  // store.read_only, postgres.store_first, postgres.migrate: not reachable
}

int Fail(char** error, const recap::Status& status) noexcept {
  try {
    const recap::Status said = status.InWords(CWords);
    last_remedies = said.remedies();
    if (error != nullptr) *error = Dup(said.message());
  } catch (...) {  // out of memory: the message as it is
    last_remedies.clear();
    if (error != nullptr) *error = Dup(status.message());
  }
  return static_cast<int>(status.code());
}

int Fail(char** error, int code, const char* message) noexcept {
  last_remedies.clear();
  if (error != nullptr) *error = Dup(message);
  return code;
}

char* LastRemedies() noexcept {
  try {
    Json out = Json::array();
    for (const recap::Remedy& r : last_remedies) {
      out.push_back({{"id", r.id}, {"value", r.value}, {"offset", r.offset}, {"size", r.size}});
    }
    return Dup(out.dump(-1, ' ', false, Json::error_handler_t::replace));
  } catch (...) {
    return nullptr;
  }
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

const char* recap_version(void) { return recap::Version(); }

void recap_free(void* p) { std::free(p); }

char* recap_last_error_remedies(void) { return recap::capi::LastRemedies(); }

}  // extern "C"
