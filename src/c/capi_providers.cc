// The C API's summarizers: the offline one, the HTTP one from JSON options, and a host's
// callback (CallbackProvider, answered through recap_reply_text or recap_reply_fail).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "recap/c/recap.h"
#include "recap/recap.h"

#include "capi_guard.h"
#include "capi_handles.h"
#include "recap_internal/json_depth.h"

#if RECAP_C_HAVE_HTTP
#include "recap/http/http_provider.h"
#endif

using recap::capi::Fail;
using recap::capi::Guard;
using recap::capi::JsonString;
using recap::capi::Missing;

namespace {

using Json = nlohmann::ordered_json;

// --- the callback summarizer -----------------------------------------------------------------

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

}  // namespace

extern "C" {

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

}  // extern "C"
