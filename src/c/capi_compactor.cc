// The C API's compactor calls: recap_compactor_new (with the callback event sink) and free,
// recap_append, recap_prepare (its result written once into the caller's memory) and
// recap_prepare_to (into a recap_buffer the caller keeps, in its memory), recap_plan,
// recap_compact, recap_recover and the reports.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

#include "capi_formats.h"
#include "capi_guard.h"
#include "capi_handles.h"

using recap::capi::Around;
using recap::capi::DecodeAppended;
using recap::capi::Fail;
using recap::capi::Format;
using recap::capi::Give;
using recap::capi::Guard;
using recap::capi::LeadingSystem;
using recap::capi::MessageParts;
using recap::capi::Missing;
using recap::capi::ParseFormat;

namespace {

using Json = nlohmann::ordered_json;
using recap::Status;

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

// R17.3: the ledger a compaction now would guard: every entry, and what was let go by kind.
Json LedgerJson(const recap::Ledger& ledger) {
  Json entries = Json::array();
  for (const recap::LedgerEntry& e : ledger.entries) {
    entries.push_back(
        {{"kind", recap::LedgerKindName(e.kind)}, {"text", e.text}, {"message", e.message_id}});
  }
  Json pruned = Json::object();
  for (std::size_t k = 0; k < recap::kLedgerKinds; ++k) {
    pruned[recap::LedgerKindName(static_cast<recap::LedgerKind>(k))] = ledger.pruned[k];
  }
  return Json{{"entries", std::move(entries)}, {"pruned", std::move(pruned)}};
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
              {"background_ready", p.background_ready},
              {"ledger", LedgerJson(p.ledger)}};
}

// --- what recap_prepare and recap_prepare_to write ------------------------------------------

// {"messages":[…],"system":…,<the figures' members>}: its pieces, and the Prepared whose
// transcript holds the messages they view.
struct PreparedText {
  static constexpr std::string_view kHead = "{\"messages\":";
  static constexpr std::size_t kMessagesOffset = kHead.size();

  recap::Prepared prepared;
  std::vector<std::string_view> parts;  // each message's kept encoded form
  std::string system_member;            // ,"system":"…" or empty
  std::string figures;                  // the figures as a JSON object

  // '[' + the parts joined by ',' + ']'.
  std::size_t MessagesLength() const {
    std::size_t n = 2 + (parts.empty() ? 0 : parts.size() - 1);
    for (std::string_view p : parts) n += p.size();
    return n;
  }
  // The whole text, without a terminating NUL.
  std::size_t Size() const {
    return kHead.size() + MessagesLength() + system_member.size() + figures.size();
  }
  // Hands the text to `put` piece by piece, in order (Size() bytes in all).
  template <typename Put>
  void Write(Put&& put) const {
    static constexpr std::string_view kComma = ",";
    put(kHead);
    put(std::string_view("["));
    for (std::size_t k = 0; k < parts.size(); ++k) {
      if (k > 0) put(kComma);
      put(parts[k]);
    }
    put(std::string_view("]"));
    put(system_member);
    put(kComma);
    put(std::string_view(figures).substr(1));  // the figures' members and their '}'
  }
};

// recap_prepare's and recap_prepare_to's work up to the writing: Compactor::Prepare, then the
// pieces of the text in `format`. RECAP_OK, or the code of the failure (its message in
// *error, named after `function`).
int PrepareText(const char* function, recap_compactor* compactor, const char* session,
                const char* format, const recap_sizes* sizes, PreparedText* text, char** error) {
  recap::Result<Format> f = ParseFormat(function, format);
  if (!f.ok()) return Fail(error, f.status());
  recap::Result<recap::Prepared> prepared = compactor->compactor->Prepare(session, Sizes(sizes));
  if (!prepared.ok()) return Fail(error, prepared.status());
  text->prepared = std::move(*prepared);
  recap::Result<Around> around = LeadingSystem(*f, text->prepared.messages);
  if (!around.ok()) return Fail(error, around.status().WithContext(function));
  const Status encoded = MessageParts(*f, text->prepared.messages, around->begin, &text->parts);
  if (!encoded.ok()) return Fail(error, encoded.WithContext(function));
  text->system_member = std::move(around->system_member);
  text->figures = PreparedFigures(text->prepared).dump();
  return static_cast<int>(RECAP_OK);
}

// --- the event sink --------------------------------------------------------------------------

class CallbackSink final : public recap::EventSink {
 public:
  CallbackSink(recap_event_fn on_event, void* user_data)
      : on_event_(on_event), user_data_(user_data) {}
  void OnEvent(const recap::Event& event) override { on_event_(user_data_, event.json.c_str()); }

 private:
  const recap_event_fn on_event_;
  void* const user_data_;
};

}  // namespace

extern "C" {

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
    PreparedText text;
    const int code = PrepareText("recap_prepare", compactor, session, format, sizes, &text, error);
    if (code != RECAP_OK) return code;
    // Written once into the caller's memory: the messages' kept text is copied once, as a
    // C++ host's EncodeTranscript does.
    const std::size_t total = text.Size();
    char* out = static_cast<char*>(std::malloc(total + 1));
    if (out == nullptr) return Fail(error, RECAP_RESOURCE_EXHAUSTED, "recap: out of memory");
    char* w = out;
    text.Write([&w](std::string_view piece) {
      if (!piece.empty()) std::memcpy(w, piece.data(), piece.size());
      w += piece.size();
    });
    *w = '\0';
    *result_json = out;
    return static_cast<int>(RECAP_OK);
  });
}

int recap_prepare_to(recap_compactor* compactor, const char* session, const char* format,
                     const recap_sizes* sizes, recap_buffer* out, char** error) {
  return Guard("recap_prepare_to", error, [&]() -> int {
    if (compactor == nullptr) return Fail(error, Missing("recap_prepare_to", "compactor"));
    if (session == nullptr) return Fail(error, Missing("recap_prepare_to", "session"));
    if (out == nullptr) return Fail(error, Missing("recap_prepare_to", "out"));
    PreparedText text;
    const int code =
        PrepareText("recap_prepare_to", compactor, session, format, sizes, &text, error);
    if (code != RECAP_OK) return code;
    // Into the memory the buffer already has when the text fits in it; outgrown, it moves to
    // memory with half as much again to spare, so that a session growing turn by turn moves it
    // now and then, not every turn (and reserve() is called only to grow: before C++20 a
    // smaller request may shrink the string). Nothing above touched the buffer, so a failure
    // leaves it as it was; growing is the one step left that can fail (out of memory, before
    // anything is written).
    const std::size_t total = text.Size();
    std::string& bytes = out->bytes;
    if (total > bytes.capacity()) {
      std::string grown;
      grown.reserve(std::max(total, bytes.capacity() + bytes.capacity() / 2));
      bytes.swap(grown);  // the old memory goes now, its text not copied
    }
    bytes.clear();
    text.Write([&bytes](std::string_view piece) { bytes.append(piece.data(), piece.size()); });
    out->messages_offset = PreparedText::kMessagesOffset;
    out->messages_length = text.MessagesLength();
    return static_cast<int>(RECAP_OK);
  });
}

recap_buffer* recap_buffer_new(void) { return new (std::nothrow) recap_buffer(); }

void recap_buffer_free(recap_buffer* buffer) { delete buffer; }

const char* recap_buffer_data(const recap_buffer* buffer) {
  return buffer == nullptr ? "" : buffer->bytes.c_str();
}

size_t recap_buffer_size(const recap_buffer* buffer) {
  return buffer == nullptr ? 0 : buffer->bytes.size();
}

void recap_buffer_messages(const recap_buffer* buffer, size_t* offset, size_t* length) {
  if (offset != nullptr) *offset = buffer == nullptr ? 0 : buffer->messages_offset;
  if (length != nullptr) *length = buffer == nullptr ? 0 : buffer->messages_length;
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
