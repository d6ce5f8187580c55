// recap — the C API (include/recap/c/recap.h) over the C++ one.
//
// Every entry point runs its body inside Guard(), which turns a Status into the C code and a
// malloc'd message, and any exception into RECAP_RESOURCE_EXHAUSTED (std::bad_alloc) or
// RECAP_INTERNAL: nothing C++ crosses the boundary. The handles hold shared_ptrs, so that a
// compactor keeps its store and provider alive whatever the host frees first.
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/c/recap.h"
#include "recap/recap.h"

#include "recap_internal/json_depth.h"

#if RECAP_C_HAVE_SQLITE
#include "recap/sqlite/sqlite_store.h"
#endif
#if RECAP_C_HAVE_POSTGRES
#include "recap/postgres/postgres_store.h"
#endif
#if RECAP_C_HAVE_HTTP
#include "recap/http/http_provider.h"
#endif

struct recap_store {
  std::shared_ptr<recap::SessionStore> store;
};

struct recap_provider {
  std::shared_ptr<recap::Provider> provider;
};

struct recap_compactor {
  std::unique_ptr<recap::Compactor> compactor;
};

// One answer of a callback summarizer, filled by recap_reply_text or recap_reply_fail.
struct recap_reply {
  const recap::CancellationToken* cancel = nullptr;
  bool given = false;
  recap::Completion completion;
  recap::Status failure;
};

namespace {

using Json = nlohmann::ordered_json;
using recap::Status;

// A copy of `text` the caller frees with recap_free; null when memory ran out.
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
int Give(std::string_view text, char** out, char** error) noexcept {
  char* copy = Dup(text);
  if (copy == nullptr) return Fail(error, RECAP_RESOURCE_EXHAUSTED, "recap: out of memory");
  *out = copy;
  return RECAP_OK;
}

// The checks every entry point makes of its pointers, as a message that names the function
// and the parameter.
recap::Status Missing(const char* function, const char* parameter) {
  return recap::Status::InvalidArgument(std::string(function) + ": `" + parameter + "` is NULL");
}

std::string JsonString(std::string_view text) {
  return Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// --- formats ---------------------------------------------------------------------------------

enum class Format { kOpenAiChat, kAnthropic, kOpenAiResponses, kNative };

recap::Result<Format> ParseFormat(const char* function, const char* format) {
  if (format == nullptr) return Missing(function, "format");
  const std::string_view f(format);
  if (f == "openai-chat") return Format::kOpenAiChat;
  if (f == "anthropic") return Format::kAnthropic;
  if (f == "openai-responses") return Format::kOpenAiResponses;
  if (f == "recap") return Format::kNative;
  return recap::Status::InvalidArgument(
      std::string(function) + ": unknown format " + JsonString(f.substr(0, 64)) +
      "; use \"openai-chat\", \"anthropic\", \"openai-responses\" or \"recap\"");
}

// The messages of `json` (an array, or one message object) in `format`, every one kept as a
// message: a leading system message is appended like the others (it is the session's
// instructions in the store, SPEC R12.1).
recap::Result<std::vector<recap::Message>> DecodeAppended(Format format, std::string_view json) {
  recap::DecodeOptions options;
  options.split_instructions = false;
  std::size_t i = 0;
  while (i < json.size() &&
         (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' || json[i] == '\r')) {
    ++i;
  }
  if (i < json.size() && json[i] == '{') {
    // recap's own form has two kinds of object: a message, and the document
    // {"format": "recap", "instructions": …, "messages": [...]} that EncodeMessages writes.
    std::optional<recap::Status> as_document;
    if (format == Format::kNative) {
      recap::Result<recap::Conversation> doc = recap::native::DecodeMessages(json, options);
      if (doc.ok()) {
        std::vector<recap::Message> messages;
        if (doc->instructions) messages.push_back(std::move(*doc->instructions));
        for (recap::Message& m : doc->messages) messages.push_back(std::move(m));
        return messages;
      }
      as_document = doc.status();
    }
    recap::Result<recap::Message> one =
        format == Format::kOpenAiChat  ? recap::openai_chat::DecodeMessage(json, options)
        : format == Format::kAnthropic ? recap::anthropic::DecodeMessage(json, options)
        : format == Format::kNative    ? recap::native::DecodeMessage(json, options)
                                       : recap::openai_responses::DecodeMessage(json, options);
    if (!one.ok()) {
      // A document whose messages were read up to a bad one: that one is the problem.
      if (as_document && as_document->message().find("messages[") != std::string::npos) {
        return *as_document;
      }
      return one.status();
    }
    std::vector<recap::Message> messages;
    messages.push_back(std::move(*one));
    return messages;
  }
  recap::Result<recap::Conversation> all =
      format == Format::kOpenAiChat  ? recap::openai_chat::DecodeMessages(json, options)
      : format == Format::kAnthropic ? recap::anthropic::DecodeMessages(json, options)
      : format == Format::kNative    ? recap::native::DecodeMessages(json, options)
                                     : recap::openai_responses::DecodeMessages(json, options);
  RECAP_RETURN_IF_ERROR(all);
  std::vector<recap::Message> messages;
  if (all->instructions) messages.push_back(std::move(*all->instructions));
  for (recap::Message& m : all->messages) messages.push_back(std::move(m));
  return messages;
}

// What recap_prepare writes around the messages: for Anthropic, which carries the system
// prompt outside the messages, the leading system messages' text as "system" (and the
// messages start after them).
struct Around {
  std::size_t begin = 0;
  std::string system_member;  // ,"system":"…" or empty
};

recap::Result<Around> LeadingSystem(Format format, const recap::Transcript& transcript) {
  Around around;
  if (format != Format::kAnthropic) return around;
  std::string system;
  for (; around.begin < transcript.size(); ++around.begin) {
    const recap::Message& m = transcript[around.begin];
    if (m.role != recap::Role::kSystem) break;
    for (const recap::Part& part : m.parts) {
      if (!std::holds_alternative<recap::Text>(part)) {
        return Status::InvalidArgument(
            "the session's system message " + JsonString(m.id) +
            " holds more than text, and Anthropic carries the system prompt as text; "
            "prepare it in another format");
      }
    }
    if (!system.empty()) system += "\n\n";
    system += recap::JoinedText(m);
  }
  if (around.begin > 0) around.system_member = ",\"system\":" + JsonString(system);
  return around;
}

// The pieces of the messages array (each message's kept encoded form: the codecs'
// EncodeTranscriptParts), so that the result is assembled with one copy of their bytes.
Status MessageParts(Format format, const recap::Transcript& transcript, std::size_t begin,
                    std::vector<std::string_view>* parts) {
  switch (format) {
    case Format::kOpenAiChat:
      return recap::openai_chat::EncodeTranscriptParts(transcript, begin, parts);
    case Format::kAnthropic:
      return recap::anthropic::EncodeTranscriptParts(transcript, begin, parts);
    case Format::kOpenAiResponses:
      return recap::openai_responses::EncodeTranscriptParts(transcript, begin, parts);
    case Format::kNative: break;
  }
  return recap::native::EncodeTranscriptParts(transcript, begin, parts);
}

recap::RequestSizes Sizes(const recap_sizes* sizes) {
  recap::RequestSizes s;
  if (sizes == nullptr) return s;
  s.instructions_chars = sizes->instructions_chars;
  s.tool_catalog_chars = sizes->tool_catalog_chars;
  if (sizes->profile_context_window != 0) s.profile_context_window = sizes->profile_context_window;
  return s;
}

Json OptionalSize(const std::optional<std::size_t>& n) { return n ? Json(*n) : Json(nullptr); }

Json UncertainJson(const std::vector<recap::UncertainCall>& calls) {
  Json out = Json::array();
  for (const recap::UncertainCall& c : calls) {
    out.push_back({{"message", c.message}, {"call_id", c.call_id}, {"name", c.name}});
  }
  return out;
}

Json PreparedFigures(const recap::Prepared& p) {
  Json compactions = Json::array();
  for (recap::CompactionReason r : p.compactions) {
    compactions.push_back(recap::CompactionReasonName(r));
  }
  return Json{{"version", p.version},
              {"before_chars", p.before_chars},
              {"after_chars", p.after_chars},
              {"before_tokens", p.before_tokens},
              {"after_tokens", p.after_tokens},
              {"compactions", std::move(compactions)},
              {"reduced_messages", p.reduced_messages},
              {"summarized_messages", p.summarized_messages},
              {"summarizer_calls", p.summarizer_calls},
              {"summarizer_usage",
               {{"prompt_tokens", p.summarizer_usage.prompt_tokens},
                {"completion_tokens", p.summarizer_usage.completion_tokens}}},
              {"cleared_tool_result_messages", p.cleared_tool_result_messages},
              {"provider_retired_messages", p.provider_retired_messages},
              {"background_started", p.background_started},
              {"background_swapped", p.background_swapped},
              {"background_discarded", p.background_discarded},
              {"background_in_flight", p.background_in_flight},
              {"background_wait_ms", p.background_wait_ms},
              {"waited_for_summarizer", p.waited_for_summarizer},
              {"window_tokens", OptionalSize(p.window_tokens)},
              {"window_source", p.window_source},
              {"fallback_window_tokens", p.fallback_window_tokens},
              {"trigger_rule", p.trigger_rule},
              {"over_window", p.over_window},
              {"orphan_results", p.orphan_results}};
}

Json PlanJson(const recap::Plan& p) {
  const recap::CutDecision& cut = p.cut;
  return Json{{"trigger", p.trigger},
              {"reason", p.reason ? Json(recap::CompactionReasonName(*p.reason)) : Json(nullptr)},
              {"rule", p.rule},
              {"paused", p.paused},
              {"auto_enabled", p.auto_enabled},
              {"window_tokens", OptionalSize(p.window_tokens)},
              {"window_source", p.window_source},
              {"irreducible", p.irreducible},
              {"summarizer_backoff_ms", p.summarizer_backoff_ms},
              {"full_chars", p.full_chars},
              {"full_tokens", p.full_tokens},
              {"reducible_chars", p.reducible_chars},
              {"trigger_tokens", p.trigger_tokens},
              {"trigger_chars", p.trigger_chars},
              {"cut",
               {{"skip", recap::SkipReasonName(cut.skip)},
                {"position", cut.position},
                {"summarized_chars", cut.summarized_chars},
                {"kept_chars", cut.kept_chars},
                {"kept_turns", cut.kept_turns},
                {"inside_turn", cut.inside_turn},
                {"uncertain", UncertainJson(cut.uncertain)}}},
              {"estimated_after_chars", p.estimated_after_chars},
              {"would_reduce", p.would_reduce},
              {"provider_retired_messages", p.provider_retired_messages},
              {"clearable_results", p.clearable_results},
              {"clearable_messages", p.clearable_messages},
              {"clearable_chars", p.clearable_chars},
              {"would_clear", p.would_clear},
              {"clearing_suffices", p.clearing_suffices},
              {"background_start_tokens", p.background_start_tokens},
              {"background_start_chars", p.background_start_chars},
              {"background_reached", p.background_reached},
              {"background_in_flight", p.background_in_flight},
              {"background_ready", p.background_ready}};
}

// --- the callback summarizer and the event sink ----------------------------------------------

class CallbackProvider final : public recap::Provider {
 public:
  CallbackProvider(std::string name, std::size_t window, recap_summarize_fn summarize,
                   void* user_data, void (*free_user_data)(void*))
      : name_(std::move(name)),
        window_(window),
        summarize_(summarize),
        user_data_(user_data),
        free_user_data_(free_user_data) {}
  ~CallbackProvider() override {
    if (free_user_data_ != nullptr) free_user_data_(user_data_);
  }
  CallbackProvider(const CallbackProvider&) = delete;
  CallbackProvider& operator=(const CallbackProvider&) = delete;

  recap::Result<recap::Completion> Complete(const recap::CompletionRequest& request,
                                            const recap::CancellationToken& cancel) override {
    recap::Conversation conversation;
    conversation.messages = request.messages;
    recap::Result<std::string> messages = recap::openai_chat::EncodeMessages(conversation);
    RECAP_RETURN_IF_ERROR(messages);
    // recap's own schema text, spliced as it is (it is JSON recap wrote).
    const std::string schema = request.json_schema ? *request.json_schema : "null";
    const std::string json = "{\"system\":" + JsonString(request.system_prompt) +
                             ",\"messages\":" + *messages +
                             ",\"max_output_tokens\":" + std::to_string(request.max_output_tokens) +
                             ",\"json_schema\":" + schema + "}";
    recap_reply reply;
    reply.cancel = &cancel;
    summarize_(user_data_, json.c_str(), &reply);
    if (!reply.given) {
      return recap::Status::Internal(
          "the summarizer callback '" + name_ +
          "' returned without answering; it must call recap_reply_text or recap_reply_fail "
          "before it returns");
    }
    if (!reply.failure.ok()) return reply.failure;
    return std::move(reply.completion);
  }

  std::optional<std::size_t> ContextWindow() override {
    if (window_ == 0) return std::nullopt;
    return window_;
  }

  std::string Name() const override { return name_; }

 private:
  const std::string name_;
  const std::size_t window_;
  const recap_summarize_fn summarize_;
  void* const user_data_;
  void (*const free_user_data_)(void*);
};

class CallbackSink final : public recap::EventSink {
 public:
  CallbackSink(recap_event_fn on_event, void* user_data)
      : on_event_(on_event), user_data_(user_data) {}
  void OnEvent(const recap::Event& event) override { on_event_(user_data_, event.json.c_str()); }

 private:
  const recap_event_fn on_event_;
  void* const user_data_;
};

// --- the HTTP provider's options -----------------------------------------------------------------

#if RECAP_C_HAVE_HTTP
recap::Result<recap::HttpProviderOptions> HttpOptions(std::string_view text) {
  const char* const kWhere = "recap_provider_new_http";
  if (recap::internal::FindTooDeep(text) != std::string_view::npos) {
    return recap::Status::InvalidArgument(std::string(kWhere) +
                                          ": the options nest too deep to be options");
  }
  const Json doc = Json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return recap::Status::InvalidArgument(
        std::string(kWhere) +
        ": the options must be a JSON object such as {\"protocol\": \"openai_chat\", "
        "\"baseUrl\": \"https://api.openai.com/v1\", \"model\": \"gpt-4.1-mini\", "
        "\"apiKeyEnv\": \"OPENAI_API_KEY\"}");
  }
  recap::HttpProviderOptions o;
  auto bad = [&](const std::string& key, const char* want) {
    return recap::Status::InvalidArgument(std::string(kWhere) + ": option `" + key + "` must be " +
                                          want);
  };
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& key = it.key();
    const Json& v = it.value();
    auto text_of = [&](std::string* out) -> recap::Status {
      if (!v.is_string()) return bad(key, "a string");
      *out = v.get<std::string>();
      return recap::Status::OK();
    };
    auto millis = [&](std::uint32_t* out) -> recap::Status {
      if (!v.is_number_unsigned() || v.get<std::uint64_t>() > 0xffffffffu) {
        return bad(key, "a whole number from 0 to 4294967295");
      }
      *out = static_cast<std::uint32_t>(v.get<std::uint64_t>());
      return recap::Status::OK();
    };
    auto flag = [&](bool* out) -> recap::Status {
      if (!v.is_boolean()) return bad(key, "true or false");
      *out = v.get<bool>();
      return recap::Status::OK();
    };
    recap::Status s;
    if (key == "protocol") {
      std::string name;
      s = text_of(&name);
      if (s.ok()) {
        recap::Result<recap::HttpProtocol> p = recap::ParseHttpProtocol(name);
        if (!p.ok()) return p.status().WithContext(kWhere);
        o.protocol = *p;
      }
    } else if (key == "baseUrl") {
      s = text_of(&o.base_url);
    } else if (key == "model") {
      s = text_of(&o.model);
    } else if (key == "apiKey") {
      s = text_of(&o.api_key);
    } else if (key == "apiKeyEnv") {
      s = text_of(&o.api_key_env);
    } else if (key == "extraHeaders") {
      if (!v.is_object()) return bad(key, "an object of header names and string values");
      for (auto h = v.begin(); h != v.end(); ++h) {
        if (!h.value().is_string()) {
          return bad(key + "." + h.key(), "a string (the header's value)");
        }
        o.extra_headers.emplace_back(h.key(), h.value().get<std::string>());
      }
    } else if (key == "connectTimeoutMs") {
      s = millis(&o.connect_timeout_ms);
    } else if (key == "timeoutMs") {
      s = millis(&o.timeout_ms);
    } else if (key == "maxRetries") {
      s = millis(&o.max_retries);
    } else if (key == "retryBaseDelayMs") {
      s = millis(&o.retry_base_delay_ms);
    } else if (key == "maxRetryDelayMs") {
      s = millis(&o.max_retry_delay_ms);
    } else if (key == "allowInsecureHttp") {
      s = flag(&o.allow_insecure_http);
    } else if (key == "verifyTls") {
      s = flag(&o.verify_tls);
    } else if (key == "caPath") {
      s = text_of(&o.ca_path);
    } else if (key == "structuredOutput") {
      s = flag(&o.structured_output);
    } else if (key == "anthropicVersion") {
      s = text_of(&o.anthropic_version);
    } else if (key == "maxTokensField") {
      s = text_of(&o.max_tokens_field);
    } else if (key == "stream") {
      s = flag(&o.stream);
    } else if (key == "contextWindow") {
      if (v.is_null()) continue;
      if (!v.is_number_unsigned()) return bad(key, "a whole number of tokens, or null");
      o.context_window = v.get<std::size_t>();
    } else if (key == "name") {
      s = text_of(&o.name);
    } else {
      return recap::Status::InvalidArgument(
          std::string(kWhere) + ": unknown option " + JsonString(key.substr(0, 64)) +
          "; the options are protocol, baseUrl, model, apiKey, apiKeyEnv, extraHeaders, "
          "connectTimeoutMs, timeoutMs, maxRetries, retryBaseDelayMs, maxRetryDelayMs, "
          "allowInsecureHttp, verifyTls, caPath, structuredOutput, anthropicVersion, "
          "maxTokensField, stream, contextWindow and name");
    }
    RECAP_RETURN_IF_ERROR(s);
  }
  if (!doc.contains("protocol")) {
    return recap::Status::InvalidArgument(
        std::string(kWhere) +
        ": option `protocol` is required: \"openai_chat\", \"anthropic\", "
        "\"openai_responses\", \"openai_compact\" or \"anthropic_compact\"");
  }
  return o;
}
#endif

recap::Result<std::shared_ptr<recap::SessionStore>> OpenStore(std::string_view where) {
  const char* const kWhere = "recap_store_open";
  if (where == "memory") return recap::NewInMemorySessionStore();
  if (where.rfind("sqlite:", 0) == 0) {
    const std::string path(where.substr(7));
    if (path.empty()) {
      return recap::Status::InvalidArgument(std::string(kWhere) +
                                            ": \"sqlite:\" names no file; write \"sqlite:PATH\"");
    }
#if RECAP_C_HAVE_SQLITE
    return recap::OpenSqliteSessionStore(path);
#else
    return recap::Status::FailedPrecondition(
        std::string(kWhere) +
        ": this recap was built without its SQLite store; rebuild it with "
        "-DRECAP_BUILD_SQLITE=ON");
#endif
  }
  if (where.rfind("postgresql://", 0) == 0 || where.rfind("postgres://", 0) == 0) {
#if RECAP_C_HAVE_POSTGRES
    recap::PostgresStoreOptions options;
    options.connection = std::string(where);
    return recap::OpenPostgresSessionStore(options);
#else
    return recap::Status::FailedPrecondition(
        std::string(kWhere) +
        ": this recap was built without its PostgreSQL store; rebuild it with "
        "-DRECAP_BUILD_POSTGRES=ON");
#endif
  }
  // Only what comes before a ':' is shown: whatever follows may be a password.
  const std::string_view shown = where.substr(0, std::min(where.find(':'), std::size_t{32}));
  return recap::Status::InvalidArgument(
      std::string(kWhere) + ": " + JsonString(shown) +
      (where.find(':') != std::string_view::npos ? " (before ':')" : "") +
      " names no kind of store; use \"memory\", \"sqlite:PATH\" or a postgresql:// URL");
}

}  // namespace

extern "C" {

const char* recap_code_name(int code) {
  if (code < RECAP_OK || code > RECAP_INTERNAL) return "unknown";
  return recap::StatusCodeName(static_cast<recap::StatusCode>(code));
}

const char* recap_version(void) { return recap::LibraryVersion(); }

void recap_free(void* p) { std::free(p); }

size_t recap_count_chars(const char* text) {
  return text == nullptr ? 0 : recap::CountCodePoints(text);
}

int recap_store_open(const char* where, recap_store** out, char** error) {
  return Guard("recap_store_open", error, [&]() -> int {
    if (where == nullptr) return Fail(error, Missing("recap_store_open", "where"));
    if (out == nullptr) return Fail(error, Missing("recap_store_open", "out"));
    recap::Result<std::shared_ptr<recap::SessionStore>> store = OpenStore(where);
    if (!store.ok()) return Fail(error, store.status());
    *out = new recap_store{std::move(*store)};
    return RECAP_OK;
  });
}

void recap_store_free(recap_store* store) { delete store; }

int recap_provider_new_offline(recap_provider** out, char** error) {
  return Guard("recap_provider_new_offline", error, [&]() -> int {
    if (out == nullptr) return Fail(error, Missing("recap_provider_new_offline", "out"));
    *out = new recap_provider{std::shared_ptr<recap::Provider>(recap::NewOfflineSummarizer())};
    return RECAP_OK;
  });
}

int recap_provider_new_http(const char* options_json, recap_provider** out, char** error) {
  return Guard("recap_provider_new_http", error, [&]() -> int {
    if (options_json == nullptr)
      return Fail(error, Missing("recap_provider_new_http", "options_json"));
    if (out == nullptr) return Fail(error, Missing("recap_provider_new_http", "out"));
#if RECAP_C_HAVE_HTTP
    recap::Result<recap::HttpProviderOptions> options = HttpOptions(options_json);
    if (!options.ok()) return Fail(error, options.status());
    recap::Result<std::shared_ptr<recap::Provider>> provider =
        recap::NewHttpProvider(std::move(*options));
    if (!provider.ok())
      return Fail(error, provider.status().WithContext("recap_provider_new_http"));
    *out = new recap_provider{std::move(*provider)};
    return RECAP_OK;
#else
    return Fail(error, recap::Status::FailedPrecondition(
                           "recap_provider_new_http: this recap was built without its HTTP "
                           "summarizers; rebuild it with -DRECAP_BUILD_HTTP=ON"));
#endif
  });
}

int recap_provider_new_callback(const char* name, size_t context_window,
                                recap_summarize_fn summarize, void* user_data,
                                void (*free_user_data)(void* user_data), recap_provider** out,
                                char** error) {
  return Guard("recap_provider_new_callback", error, [&]() -> int {
    if (summarize == nullptr)
      return Fail(error, Missing("recap_provider_new_callback", "summarize"));
    if (out == nullptr) return Fail(error, Missing("recap_provider_new_callback", "out"));
    std::string shown = name == nullptr || *name == '\0' ? "callback" : name;
    *out = new recap_provider{std::make_shared<CallbackProvider>(
        std::move(shown), context_window, summarize, user_data, free_user_data)};
    return RECAP_OK;
  });
}

int recap_reply_text(recap_reply* reply, const char* text, int truncated, uint64_t prompt_tokens,
                     uint64_t completion_tokens) {
  return Guard("recap_reply_text", nullptr, [&]() -> int {
    if (reply == nullptr || text == nullptr) return static_cast<int>(RECAP_INVALID_ARGUMENT);
    if (reply->given) return static_cast<int>(RECAP_FAILED_PRECONDITION);
    reply->completion.text = text;
    reply->completion.finish_reason =
        truncated != 0 ? recap::FinishReason::kLength : recap::FinishReason::kStop;
    reply->completion.usage.prompt_tokens = prompt_tokens;
    reply->completion.usage.completion_tokens = completion_tokens;
    reply->given = true;
    return static_cast<int>(RECAP_OK);
  });
}

int recap_reply_fail(recap_reply* reply, int code, const char* message) {
  return Guard("recap_reply_fail", nullptr, [&]() -> int {
    if (reply == nullptr) return static_cast<int>(RECAP_INVALID_ARGUMENT);
    if (reply->given) return static_cast<int>(RECAP_FAILED_PRECONDITION);
    // A failure must be one: "ok" or a number that is no code is recorded as internal.
    const recap::StatusCode c = code > RECAP_OK && code <= RECAP_INTERNAL
                                    ? static_cast<recap::StatusCode>(code)
                                    : recap::StatusCode::kInternal;
    std::string text = message == nullptr || *message == '\0'
                           ? std::string("the summarizer callback failed without a message")
                           : std::string(message);
    if (c == recap::StatusCode::kInternal && code != RECAP_INTERNAL) {
      text += " (the callback failed with code " + std::to_string(code) +
              ", which is no failure code; recap takes it as internal)";
    }
    reply->failure = recap::Status(c, std::move(text));
    reply->given = true;
    return static_cast<int>(RECAP_OK);
  });
}

int recap_reply_cancelled(const recap_reply* reply) {
  return reply != nullptr && reply->cancel != nullptr && reply->cancel->IsCancelled() ? 1 : 0;
}

void recap_provider_free(recap_provider* provider) { delete provider; }

int recap_compactor_new(const char* config_json, recap_provider* provider, recap_store* store,
                        recap_event_fn on_event, void* event_user_data, recap_compactor** out,
                        char** error) {
  return Guard("recap_compactor_new", error, [&]() -> int {
    if (out == nullptr) return Fail(error, Missing("recap_compactor_new", "out"));
    recap::Result<recap::Config> config =
        recap::Config::FromJson(config_json == nullptr ? std::string_view("{}") : config_json);
    if (!config.ok()) return Fail(error, config.status().WithContext("recap_compactor_new"));
    std::vector<std::shared_ptr<recap::EventSink>> sinks;
    if (on_event != nullptr)
      sinks.push_back(std::make_shared<CallbackSink>(on_event, event_user_data));
    recap::Result<std::unique_ptr<recap::Compactor>> created = recap::Compactor::Create(
        std::move(*config), provider != nullptr ? provider->provider : nullptr,
        store != nullptr ? store->store : nullptr, {}, std::move(sinks));
    if (!created.ok()) return Fail(error, created.status().WithContext("recap_compactor_new"));
    *out = new recap_compactor{std::move(*created)};
    return RECAP_OK;
  });
}

void recap_compactor_free(recap_compactor* compactor) {
  try {
    delete compactor;
  } catch (...) {
    // A destructor that throws is a bug; the C caller must never see it.
  }
}

int recap_append(recap_compactor* compactor, const char* session, const char* format,
                 const char* messages_json, uint64_t* version, char** error) {
  return Guard("recap_append", error, [&]() -> int {
    if (compactor == nullptr) return Fail(error, Missing("recap_append", "compactor"));
    if (session == nullptr) return Fail(error, Missing("recap_append", "session"));
    if (messages_json == nullptr) return Fail(error, Missing("recap_append", "messages_json"));
    recap::Result<Format> f = ParseFormat("recap_append", format);
    if (!f.ok()) return Fail(error, f.status());
    recap::Result<std::vector<recap::Message>> messages = DecodeAppended(*f, messages_json);
    if (!messages.ok()) {
      return Fail(error, messages.status().WithContext("recap_append: nothing was appended"));
    }
    if (messages->empty()) {
      return Fail(error, recap::Status::InvalidArgument(
                             "recap_append: `messages_json` holds no message; nothing was "
                             "appended"));
    }
    recap::Result<std::uint64_t> v =
        compactor->compactor->store().AppendMessages(session, std::move(*messages));
    if (!v.ok()) return Fail(error, v.status().WithContext("recap_append: nothing was appended"));
    if (version != nullptr) *version = *v;
    return RECAP_OK;
  });
}

int recap_prepare(recap_compactor* compactor, const char* session, const char* format,
                  const recap_sizes* sizes, char** result_json, char** error) {
  return Guard("recap_prepare", error, [&]() -> int {
    if (compactor == nullptr) return Fail(error, Missing("recap_prepare", "compactor"));
    if (session == nullptr) return Fail(error, Missing("recap_prepare", "session"));
    if (result_json == nullptr) return Fail(error, Missing("recap_prepare", "result_json"));
    recap::Result<Format> f = ParseFormat("recap_prepare", format);
    if (!f.ok()) return Fail(error, f.status());
    recap::Result<recap::Prepared> prepared = compactor->compactor->Prepare(session, Sizes(sizes));
    if (!prepared.ok()) return Fail(error, prepared.status());
    recap::Result<Around> around = LeadingSystem(*f, prepared->messages);
    if (!around.ok()) return Fail(error, around.status().WithContext("recap_prepare"));
    std::vector<std::string_view> parts;
    const Status encoded = MessageParts(*f, prepared->messages, around->begin, &parts);
    if (!encoded.ok()) return Fail(error, encoded.WithContext("recap_prepare"));
    const std::string figures = PreparedFigures(*prepared).dump();
    // {"messages":[…],"system":…,<the figures' members>}, written once into the caller's
    // memory: the messages' kept text is copied once, as a C++ host's EncodeTranscript does.
    static constexpr std::string_view kHead = "{\"messages\":[";
    std::size_t total = kHead.size() + 2 + around->system_member.size() + figures.size();
    for (std::string_view p : parts) total += p.size() + 1;
    char* out = static_cast<char*>(std::malloc(total + 1));
    if (out == nullptr) return Fail(error, RECAP_RESOURCE_EXHAUSTED, "recap: out of memory");
    char* w = out;
    auto put = [&w](std::string_view piece) {
      if (!piece.empty()) std::memcpy(w, piece.data(), piece.size());
      w += piece.size();
    };
    put(kHead);
    for (std::size_t k = 0; k < parts.size(); ++k) {
      if (k > 0) *w++ = ',';
      put(parts[k]);
    }
    *w++ = ']';
    put(around->system_member);
    *w++ = ',';
    put(std::string_view(figures).substr(1));  // the figures' members and their '}'
    *w = '\0';
    *result_json = out;
    return static_cast<int>(RECAP_OK);
  });
}

int recap_plan(recap_compactor* compactor, const char* session, const recap_sizes* sizes,
               char** plan_json, char** error) {
  return Guard("recap_plan", error, [&]() -> int {
    if (compactor == nullptr) return Fail(error, Missing("recap_plan", "compactor"));
    if (session == nullptr) return Fail(error, Missing("recap_plan", "session"));
    if (plan_json == nullptr) return Fail(error, Missing("recap_plan", "plan_json"));
    recap::Result<recap::Plan> plan = compactor->compactor->PlanFor(session, Sizes(sizes));
    if (!plan.ok()) return Fail(error, plan.status());
    return Give(PlanJson(*plan).dump(), plan_json, error);
  });
}

int recap_compact(recap_compactor* compactor, const char* session, const char* focus,
                  const recap_sizes* sizes, char** outcome_json, char** error) {
  return Guard("recap_compact", error, [&]() -> int {
    if (compactor == nullptr) return Fail(error, Missing("recap_compact", "compactor"));
    if (session == nullptr) return Fail(error, Missing("recap_compact", "session"));
    if (outcome_json == nullptr) return Fail(error, Missing("recap_compact", "outcome_json"));
    recap::CompactOptions options;
    if (focus != nullptr) options.focus = focus;
    options.sizes = Sizes(sizes);
    recap::Result<recap::CompactOutcome> o = compactor->compactor->Compact(session, options);
    if (!o.ok()) return Fail(error, o.status());
    // The checkpoint's JSON as CheckpointToJson writes it (always an object).
    const Json checkpoint =
        o->compacted ? Json::parse(recap::CheckpointToJson(o->checkpoint), nullptr, false)
                     : Json(nullptr);
    const Json out{{"compacted", o->compacted},
                   {"skipped", recap::SkipReasonName(o->skipped)},
                   {"summarized_messages", o->summarized_messages},
                   {"before_chars", o->before_chars},
                   {"after_chars", o->after_chars},
                   {"checkpoint", std::move(checkpoint)},
                   {"partial", o->partial},
                   {"writer", o->writer},
                   {"version", o->version},
                   {"provider_retired_messages", o->provider_retired_messages}};
    return Give(out.dump(-1, ' ', false, Json::error_handler_t::replace), outcome_json, error);
  });
}

int recap_recover(recap_compactor* compactor, const char* session, int acknowledge,
                  char** outcome_json, char** error) {
  return Guard("recap_recover", error, [&]() -> int {
    if (compactor == nullptr) return Fail(error, Missing("recap_recover", "compactor"));
    if (session == nullptr) return Fail(error, Missing("recap_recover", "session"));
    if (outcome_json == nullptr) return Fail(error, Missing("recap_recover", "outcome_json"));
    recap::Result<recap::RecoveryOutcome> o =
        compactor->compactor->Recover(session, acknowledge != 0);
    if (!o.ok()) return Fail(error, o.status());
    const Json out{{"recovered", UncertainJson(o->recovered)}, {"version", o->version}};
    return Give(out.dump(-1, ' ', false, Json::error_handler_t::replace), outcome_json, error);
  });
}

int recap_report_overflow(recap_compactor* compactor, const char* session, size_t rejected_tokens,
                          char** error) {
  return Guard("recap_report_overflow", error, [&]() -> int {
    if (compactor == nullptr) return Fail(error, Missing("recap_report_overflow", "compactor"));
    if (session == nullptr) return Fail(error, Missing("recap_report_overflow", "session"));
    compactor->compactor->ReportOverflow(
        session, rejected_tokens == 0 ? std::nullopt : std::optional<std::size_t>(rejected_tokens));
    return static_cast<int>(RECAP_OK);
  });
}

int recap_report_prompt_tokens(recap_compactor* compactor, const char* session,
                               size_t prompt_tokens, char** error) {
  return Guard("recap_report_prompt_tokens", error, [&]() -> int {
    if (compactor == nullptr)
      return Fail(error, Missing("recap_report_prompt_tokens", "compactor"));
    if (session == nullptr) return Fail(error, Missing("recap_report_prompt_tokens", "session"));
    compactor->compactor->ReportPromptTokens(session, prompt_tokens);
    return static_cast<int>(RECAP_OK);
  });
}

}  // extern "C"
