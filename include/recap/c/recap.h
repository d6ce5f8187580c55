/** @file
 * recap — the C API (SPEC R16.1): the Compactor, the session stores, the summarizers and the
 * events, for hosts written in C or in any language that can call C (Python's ctypes or cffi,
 * Node's N-API, Go's cgo, Rust's FFI …). C99; nothing C++ crosses it.
 *
 * A host creates a compactor once and calls it once per turn:
 *
 * ```c
 *   recap_compactor* c = NULL;
 *   char* error = NULL;
 *   if (recap_compactor_new(NULL, NULL, NULL, NULL, NULL, &c, &error) != RECAP_OK) { ... }
 *   recap_append(c, "s1", "openai-chat", "[{\"role\":\"user\",\"content\":\"hi\"}]", NULL, &error);
 *   char* send = NULL;
 *   recap_prepare(c, "s1", "openai-chat", NULL, &send, &error);  // {"messages": [...], ...}
 *   ...
 *   recap_free(send);
 *   recap_compactor_free(c);
 * ```
 *
 * (recap_prepare_to writes the same into a recap_buffer the host keeps from turn to turn, in
 * memory already mapped: what a host with long sessions uses.)
 *
 * Messages go in and come out as JSON text in any format recap's codecs know (codec.h):
 * ```text
 *   "openai-chat"       OpenAI chat-completions `messages`
 *   "anthropic"         Anthropic Messages `messages`
 *   "openai-responses"  OpenAI Responses `input` items
 *   "recap"             recap's own form (what the session stores write)
 * ```
 *
 * Errors. Every call that can fail returns an int: RECAP_OK (0) or one of the codes below (the
 * C++ StatusCode with the same number). Its last parameter `char** error` receives, on failure,
 * a message for people (what was wrong and what to do) that the caller frees with recap_free;
 * pass NULL to ignore it. On success *error is left alone. Out parameters are written only on
 * success. No C++ exception ever leaves a function of this header: running out of memory is
 * RECAP_RESOURCE_EXHAUSTED, anything else unexpected RECAP_INTERNAL.
 *
 * Memory. Every string recap returns (a JSON result, an error message) is the caller's and is
 * freed with recap_free; the bytes recap_prepare_to writes are its recap_buffer's, freed with
 * it. Handles are freed with their own function. Strings passed in are read
 * during the call only and must be UTF-8, NUL-terminated.
 *
 * Ownership. A compactor keeps the store and the provider it was created with: their handles
 * may be freed as soon as recap_compactor_new returns, and one store or provider handle may
 * serve several compactors.
 *
 * Threads. As in C++ (compactor.h): every function of a compactor may be called from any
 * thread; calls for the same session are serialized, calls for different sessions run in
 * parallel. The callbacks (a callback summarizer, the event function) may be called from
 * several threads at once, and from recap's worker threads when compaction.background is on.
 * A handle must not be freed while a call that uses it runs.
 */
#ifndef RECAP_C_RECAP_H_
#define RECAP_C_RECAP_H_

#include <stddef.h>
#include <stdint.h>

/** @def RECAP_C_API
 * Marks a function of the C API as part of the binary interface, as RECAP_EXPORT does for
 * C++ (recap/export.h): default visibility, or dllexport / dllimport on Windows. */
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(RECAP_STATIC)
#define RECAP_C_API
#elif defined(RECAP_BUILDING_LIBRARY)
#define RECAP_C_API __declspec(dllexport)
#else
#define RECAP_C_API __declspec(dllimport)
#endif
#else
#define RECAP_C_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** The codes, with the numbers of recap::StatusCode (status.h says what each means). */
enum {
  RECAP_OK = 0,                      /**< success */
  RECAP_INVALID_ARGUMENT = 1,        /**< something passed in is malformed or out of range */
  RECAP_NOT_FOUND = 2,               /**< a named thing (a session, a file) does not exist */
  RECAP_CONFLICT = 3,                /**< another writer changed the session first */
  RECAP_CORRUPTION = 4,              /**< stored data is damaged or from a newer recap */
  RECAP_IO_ERROR = 5,                /**< the operating system refused an operation */
  RECAP_UNAVAILABLE = 6,             /**< a remote service failed in a way that may pass */
  RECAP_DEADLINE_EXCEEDED = 7,       /**< a deadline passed before the work finished */
  RECAP_CANCELLED = 8,               /**< the work was cancelled */
  RECAP_CONTEXT_BUDGET_EXCEEDED = 9, /**< the conversation cannot be made to fit (SPEC R7) */
  RECAP_FAILED_PRECONDITION = 10,    /**< the state does not allow the operation */
  RECAP_RESOURCE_EXHAUSTED = 11,     /**< a limit was hit, or memory ran out */
  RECAP_INTERNAL = 12                /**< a bug in recap: please report it with the message */
};

/** "ok", "invalid_argument", … ; "unknown" for a number that is no code. Never NULL; static. */
RECAP_C_API const char* recap_code_name(int code);

/** The library's version, such as "0.1.0". Static. */
RECAP_C_API const char* recap_version(void);

/** What the last error message a recap call returned on this thread tells the caller to
 * change, as data: a JSON array of {"id", "value", "offset", "size"} — each a remedy of
 * docs/errors.md, the figure it carries ("" when none), and where the message says it (bytes
 * from the start of the message) — or "[]". A language built on the C API says these parts
 * in its own words with them, as the C API says them in its own (JSON members such as
 * "baseUrl"). The caller frees the result with recap_free; NULL when out of memory. */
RECAP_C_API char* recap_last_error_remedies(void);

/** Frees a string recap returned (a result or an error message). NULL is fine. */
RECAP_C_API void recap_free(void* p);

/** The characters of the NUL-terminated UTF-8 `text` as recap counts them (code points, SPEC
 * §1; a byte that is not valid UTF-8 counts as one): what recap_sizes wants, which strlen (bytes)
 * overstates for any text beyond ASCII. 0 for NULL. */
RECAP_C_API size_t recap_count_chars(const char* text);

/* --- session stores ------------------------------------------------------------------------ */

/** A session store, opened by recap_store_open; a handle the caller frees with
 * recap_store_free. */
typedef struct recap_store recap_store;

/** Opens the store `where` names:
 * ```text
 *   "memory"                    a new in-memory store (lost when its last holder goes)
 *   "sqlite:PATH"               the SQLite database file PATH, created when missing
 *   "postgresql://…", "postgres://…"
 *                               a PostgreSQL database (recap's tables in its schema `recap`,
 *                               created when missing)
 * ```
 * A kind this build of recap does not have (it was configured with RECAP_BUILD_SQLITE or
 * RECAP_BUILD_POSTGRES off) is RECAP_FAILED_PRECONDITION saying so. */
RECAP_C_API int recap_store_open(const char* where, recap_store** out, char** error);

/** Frees the handle (a compactor created with it keeps the store). NULL is fine. */
RECAP_C_API void recap_store_free(recap_store* store);

/* --- summarizers (providers) ----------------------------------------------------------------- */

/** A summarizer (a provider, provider.h): recap's offline one, an HTTP one or the host's own;
 * a handle the caller frees with recap_provider_free. */
typedef struct recap_provider recap_provider;

/** recap's offline summarizer: no model, no network (offline_summarizer.h). */
RECAP_C_API int recap_provider_new_offline(recap_provider** out, char** error);

/** An HTTP summarizer of the recap::http component (http/http_provider.h), its options as a
 * JSON object whose members are those of HttpProviderOptions in camelCase:
 * ```text
 *   {"protocol": "openai_chat" | "anthropic" | "openai_responses" | "openai_compact" |
 *                "anthropic_compact",
 *    "baseUrl": "https://api.openai.com/v1", "model": "gpt-4.1-mini",
 *    "apiKeyEnv": "OPENAI_API_KEY"  (or "apiKey": "…"),
 *    "extraHeaders": {"Name": "value"}, "connectTimeoutMs": 10000, "timeoutMs": 600000,
 *    "maxRetries": 2, "retryBaseDelayMs": 500, "maxRetryDelayMs": 30000,
 *    "allowInsecureHttp": false, "verifyTls": true, "caPath": "", "structuredOutput": false,
 *    "anthropicVersion": "2023-06-01", "maxTokensField": "max_tokens", "stream": false,
 *    "contextWindow": 128000, "name": ""}
 * ```
 * `protocol`, `baseUrl` and `model` are required. An unknown member is RECAP_INVALID_ARGUMENT
 * naming it. No message ever holds the key. Without the http component:
 * RECAP_FAILED_PRECONDITION. */
RECAP_C_API int recap_provider_new_http(const char* options_json, recap_provider** out,
                                        char** error);

/** A reply a callback summarizer gives (recap_reply_text, recap_reply_fail); recap's, valid
 * during the callback only. */
typedef struct recap_reply recap_reply;
/** A summarizer of the host's own (recap_provider_new_callback): answers `request_json`
 * through `reply` before it returns. */
typedef void (*recap_summarize_fn)(void* user_data, const char* request_json, recap_reply* reply);
/** A summarizer of the host's own: recap calls `summarize` with the request as JSON, and the
 * callback answers through `reply` before it returns. The request:
 * ```text
 *   {"system": "<system prompt>",
 *    "messages": [{"role": "user", "content": "<the rendered conversation>"}],
 *    "max_output_tokens": 16000,
 *    "json_schema": {…} or null}
 * ```
 * (`messages` in OpenAI chat form, so that most clients take it as it is; `json_schema` is the
 * schema the checkpoint should follow, for a client that asks for structured output.)
 * `name` is the summarizer's name in events (NULL: "callback"); `context_window` the model's
 * window in tokens (0: unknown — the configuration or the host's profile then says it).
 * `free_user_data`, when not NULL, is called once with `user_data` when the last holder of the
 * provider (a handle or a compactor) is freed. */
RECAP_C_API int recap_provider_new_callback(const char* name, size_t context_window,
                                            recap_summarize_fn summarize, void* user_data,
                                            void (*free_user_data)(void* user_data),
                                            recap_provider** out, char** error);

/** @{ */
/** How a callback answers. Exactly one of recap_reply_text and recap_reply_fail; a callback
 * that returns without either is a failed summarizer call (RECAP_INTERNAL, which says so).
 *   - recap_reply_text: the model's text. `truncated` non-zero when the model stopped at
 *     max_output_tokens (recap then salvages what it can instead of trusting half a
 *     checkpoint). `prompt_tokens` and `completion_tokens` as the model reported them (0:
 *     unknown); they travel in the events' `usage`.
 *   - recap_reply_fail: the call failed; `code` as in the C++ Provider contract
 *     (RECAP_UNAVAILABLE for what may pass, RECAP_DEADLINE_EXCEEDED, RECAP_RESOURCE_EXHAUSTED
 *     when the request was too long for the model …) and a message for people, without
 *     secrets. The compaction fails and changes nothing (SPEC R7.1).
 *   - recap_reply_cancelled: non-zero once recap cancelled the call (the compactor is being
 *     freed); the callback should then return soon.
 *
 * Each returns RECAP_OK, or RECAP_FAILED_PRECONDITION when the reply was given already. */
RECAP_C_API int recap_reply_text(recap_reply* reply, const char* text, int truncated,
                                 uint64_t prompt_tokens, uint64_t completion_tokens);
RECAP_C_API int recap_reply_fail(recap_reply* reply, int code, const char* message);
RECAP_C_API int recap_reply_cancelled(const recap_reply* reply);
/** @} */

/** Frees the handle (a compactor created with it keeps the provider). NULL is fine. */
RECAP_C_API void recap_provider_free(recap_provider* provider);

/* --- the compactor ------------------------------------------------------------------------- */

/** A compactor (compactor.h), made by recap_compactor_new; a handle the caller frees with
 * recap_compactor_free. */
typedef struct recap_compactor recap_compactor;

/** Called with each event (docs/events.md) as one line of JSON, on the thread that caused it.
 * It should be quick; `event_json` is valid during the call only. */
typedef void (*recap_event_fn)(void* user_data, const char* event_json);

/** Creates a compactor. `config_json`: the configuration's JSON form (docs/configuration.md;
 * NULL or "{}" for the defaults); a bad one is RECAP_INVALID_ARGUMENT naming the key.
 * `provider`: NULL for the offline summarizer. `store`: NULL for a new in-memory store.
 * `on_event`: NULL for no events; `event_user_data` is handed to it. */
RECAP_C_API int recap_compactor_new(const char* config_json, recap_provider* provider,
                                    recap_store* store, recap_event_fn on_event,
                                    void* event_user_data, recap_compactor** out, char** error);

/** Cancels and joins the compactor's background compactions, then frees it. NULL is fine. */
RECAP_C_API void recap_compactor_free(recap_compactor* compactor);

/** What the host sends besides the transcript (compactor.h, RequestSizes): the characters of
 * its system instructions and of its serialized tool catalog, and a context window it knows
 * from its own model profile (0: none). NULL wherever it is taken means all zero. The
 * instructions counted here are those the host sends itself: a system message appended to the
 * session is part of the transcript and counted there. */
typedef struct recap_sizes {
  size_t instructions_chars;     /**< the system instructions the host sends */
  size_t tool_catalog_chars;     /**< the serialized tool catalog the host sends */
  size_t profile_context_window; /**< the model's window from the host's profile; 0: none */
} recap_sizes;

/** Appends messages at the end of the session (created when new): `messages_json` is a JSON
 * array of messages, or one message object, in `format`. A leading system message is
 * appended like any other: the session's instructions, never summarized (SPEC R12.1). All or
 * nothing: a message that does not decode, or that the store refuses (an id taken, tool calls
 * sharing an id), stores nothing, and the message says which and why. `version` (may be NULL)
 * receives the session's new version. */
RECAP_C_API int recap_append(recap_compactor* compactor, const char* session, const char* format,
                             const char* messages_json, uint64_t* version, char** error);

/** The per-turn call, right before each model request (Compactor::Prepare): compacts when a
 * trigger fires, clips what is over the hard limit, and writes into *result_json what to send:
 * ```text
 *   {"messages": [...],          the transcript in `format`, to send after the instructions
 *    "system": "...",            anthropic only, when the session holds leading system
 *                                messages: their text (Anthropic carries it outside messages)
 *    "version": 12, "before_chars": …, "after_chars": …, "before_tokens": …,
 *    "after_tokens": …, "compactions": ["auto"], "reduced_messages": 0,
 *    "summarized_messages": 0, "summarizer_calls": 0,
 *    "summarizer_usage": {"prompt_tokens": 0, "completion_tokens": 0},
 *    "cleared_tool_result_messages": 0, "provider_retired_messages": 0,
 *    "background_started": false, "background_swapped": false, "background_discarded": false,
 *    "background_in_flight": false, "background_wait_ms": 0, "waited_for_summarizer": false,
 *    "window_tokens": 128000 or null, "window_source": "config", "fallback_window_tokens": 0,
 *    "trigger_rule": "", "over_window": false, "orphan_results": []}
 * ```
 * (the members of the C++ Prepared). The members come in that order, and the messages exactly
 * as the codec wrote them (EncodeTranscript), so that a host can send their bytes without
 * parsing them: the result is '{"messages":' ARRAY [',"system":' STRING] ',"version":' FIGURES
 * '}', the array starts at byte 12, and the figures never hold the text ',"version":' (a
 * string in them escapes its quotes), so the last ',"version":' ends the array (or the system
 * string). A conversation that cannot be made to fit is
 * RECAP_CONTEXT_BUDGET_EXCEEDED with a message that says what the host can do. */
RECAP_C_API int recap_prepare(recap_compactor* compactor, const char* session, const char* format,
                              const recap_sizes* sizes, char** result_json, char** error);

/** The request body in memory the host keeps. recap_prepare's result is new memory every turn,
 * and on a long session that is what a turn costs most: a 55 MB body is new pages the system
 * maps and faults in one by one, several times the cost of copying its bytes. A recap_buffer
 * is memory recap owns and the host keeps from turn to turn: recap_prepare_to writes into it,
 * in the memory it already has when the text fits (outgrown, it moves to memory with half as
 * much again to spare; it never shrinks), so that a host preparing every turn into the same
 * buffer allocates, and faults pages in, only now and then as its session grows.
 *
 * ```c
 *   recap_buffer* body = recap_buffer_new();
 *   ...each turn:
 *   if (recap_prepare_to(c, "s1", "openai-chat", NULL, body, &error) == RECAP_OK) {
 *     size_t at, length;
 *     recap_buffer_messages(body, &at, &length);
 *     send_messages(recap_buffer_data(body) + at, length);
 *   }
 *   ...
 *   recap_buffer_free(body);
 * ```
 *
 * A buffer is not tied to a compactor (it may outlive it, and serve several), and one buffer
 * must not be written by two calls at once, nor read while a call writes it. */
typedef struct recap_buffer recap_buffer;

/** A new, empty buffer (size 0); NULL when out of memory. */
RECAP_C_API recap_buffer* recap_buffer_new(void);

/** Frees the buffer and its memory. NULL is fine. */
RECAP_C_API void recap_buffer_free(recap_buffer* buffer);

/** The buffer's bytes, followed by a NUL that recap_buffer_size does not count (so that the
 * text may be read as a C string too). Valid until the next call that writes into the buffer
 * or frees it. "" for NULL. */
RECAP_C_API const char* recap_buffer_data(const recap_buffer* buffer);

/** The number of bytes in the buffer. 0 for NULL. */
RECAP_C_API size_t recap_buffer_size(const recap_buffer* buffer);

/** Where the messages array lies in the text recap_prepare_to last wrote into the buffer: its
 * first byte ('[') at *offset (always 12) and its *length bytes through its ']', so that a
 * host sends them without scanning the text. 0 and 0 for a buffer nothing was written into,
 * and for NULL. Either pointer may be NULL. */
RECAP_C_API void recap_buffer_messages(const recap_buffer* buffer, size_t* offset, size_t* length);

/** recap_prepare writing into `out` instead of new memory: the same call (the same compaction,
 * the same errors, named recap_prepare_to) and exactly the bytes recap_prepare would return,
 * which replace what the buffer held. On failure the buffer is left as it was: its bytes, size
 * and messages those of the last call that succeeded (or empty), and it may be written again. */
RECAP_C_API int recap_prepare_to(recap_compactor* compactor, const char* session,
                                 const char* format, const recap_sizes* sizes, recap_buffer* out,
                                 char** error);

/** What recap_prepare would do now, without calling the model or writing (Compactor::PlanFor):
 * the members of the C++ Plan as a JSON object, `reason` a string or null and `cut` an object
 * {"skip": "none"|…, "position", "summarized_chars", "kept_chars", "kept_turns",
 * "inside_turn", "uncertain": [{"message", "call_id", "name"}]}, and `ledger` (SPEC R17.3)
 * {"entries": [{"kind", "text", "message"}], "pruned": {kind: count}}: what a compaction now
 * would guard. */
RECAP_C_API int recap_plan(recap_compactor* compactor, const char* session,
                           const recap_sizes* sizes, char** plan_json, char** error);

/** A manual compaction (Compactor::Compact), `focus` (NULL or "") added to the summarizer's
 * instructions. *outcome_json: {"compacted": true, "skipped": "none", "summarized_messages",
 * "before_chars", "after_chars", "checkpoint": {the checkpoint's sections} or null, "partial",
 * "writer", "version", "provider_retired_messages"}. Nothing to summarize is not an error:
 * "compacted": false and `skipped` says why. */
RECAP_C_API int recap_compact(recap_compactor* compactor, const char* session, const char* focus,
                              const recap_sizes* sizes, char** outcome_json, char** error);

/** Records, for each tool call without a result, that its outcome is unknown and it was not
 * repeated (SPEC R8.3). Refused with RECAP_FAILED_PRECONDITION naming the calls unless
 * `acknowledge` is non-zero. *outcome_json: {"recovered": [{"message", "call_id", "name"}],
 * "version"}. */
RECAP_C_API int recap_recover(recap_compactor* compactor, const char* session, int acknowledge,
                              char** outcome_json, char** error);

/** The model rejected the last request of the session as too long (SPEC R2.6): the next
 * recap_prepare compacts (reason "overflow"), and the window is taken as at most
 * `rejected_tokens` from now on (0: the estimate of the last request recap_prepare returned). */
RECAP_C_API int recap_report_overflow(recap_compactor* compactor, const char* session,
                                      size_t rejected_tokens, char** error);

/** The provider's count of prompt tokens for the last request of the session (SPEC R2.4),
 * used by the window rule when compaction.calibrate is on. */
RECAP_C_API int recap_report_prompt_tokens(recap_compactor* compactor, const char* session,
                                           size_t prompt_tokens, char** error);

/* --- getting it back (SPEC R18) ------------------------------------------------------------- */

/* What a compaction summarized, a clearing cleared or the reducer clipped stays in the session's
 * history: a host (or the model, through the recall tool) can have it back, and the newest
 * compaction can be undone (recap/recall.h and compactor.h say more). */

/** The originals in the session's history that match a query, best first, cut to a budget
 * (Compactor::Recall). `query_json` is a JSON object with any of these members:
 * ```text
 *   {"query": "words to look for",       each word or run of words (parse_config, src/app.py)
 *    "ids": ["m_1", "m_2"],              messages by id (a string: one id)
 *    "first_turn": 3, "last_turn": 5,    the person's turns, inclusive (the first is
 *                                        1; first_turn needs last_turn); with "query",
 *                                        only these turns are searched
 *    "max_chars": 8000,                  the answer's size in characters (default 8000)
 *    "max_messages": 20,                 at most this many messages (default 20)
 *    "include_active": false}            messages still in the transcript too (default: only
 *                                        what was compacted, cleared, clipped or undone)
 * ```
 * At least one of "query", "ids" and a turn range; null is as if the member were left out; an
 * unknown member or one of the wrong type is RECAP_INVALID_ARGUMENT naming it. Reads the store,
 * never writes. *out_json:
 * ```text
 *   {"text": "…",                        the whole answer as the model reads it (the recall
 *                                        tool's result)
 *    "messages": [{"id", "seq", "turn", "role", "state", "replaced_by", "text", "clipped",
 *                  "score"}],            best first; `state` "summarized", "reduced", "undone"
 *                                        or "active"; `text` cut to the budget when `clipped`
 *    "left_out": 0, "left_out_ids": []}  matched but did not fit max_chars
 * ``` */
RECAP_C_API int recap_recall(recap_compactor* compactor, const char* session,
                             const char* query_json, char** out_json, char** error);

/** The recall tool's definition (named "recap_recall") as one JSON object of `format`'s tool
 * catalog, for the host's request: an OpenAI chat {"type": "function", "function": {…}}, an
 * Anthropic {"name", "description", "input_schema"} or an OpenAI Responses {"type":
 * "function", "name", …}. `format` is "openai-chat", "anthropic" or "openai-responses" ("recap"
 * is no wire format: RECAP_INVALID_ARGUMENT). Set compaction.recallTool in the configuration
 * too, so that checkpoints and clearing markers tell the model what it can ask for. */
RECAP_C_API int recap_recall_tool(const char* format, char** out_json, char** error);

/** Answers the model's call of the recall tool (Compactor::AnswerRecall): *out_message_json is
 * the tool result as one message object in `format`, to append to the session with
 * recap_append (same format) like any tool result and to send with the next request: an OpenAI
 * chat {"role": "tool", "tool_call_id", "content"}, an Anthropic {"role": "user", "content":
 * [{"type": "tool_result", …}]}, an OpenAI Responses {"type": "function_call_output",
 * "call_id", "output"}, or recap's own tool message. `call_json` is the call as the model's
 * reply holds it in `format` — an OpenAI chat tool_calls element {"id", "type": "function",
 * "function": {"name", "arguments"}}, an Anthropic tool_use block {"type": "tool_use", "id",
 * "name", "input"}, an OpenAI Responses function_call item {"type": "function_call", "call_id",
 * "name", "arguments"}, or recap's {"type": "tool_call", …} — or, in any format, simply
 * {"id": "call_1", "name": "recap_recall", "arguments": "{\"query\": \"parse_config\"}"}
 * (`arguments` the JSON text, or the object itself). Arguments the model got wrong are not an
 * error: the result is an error result that tells the model how to call the tool. A call to
 * another tool, or `call_json` that is no tool call, is RECAP_INVALID_ARGUMENT. */
RECAP_C_API int recap_answer_recall(recap_compactor* compactor, const char* session,
                                    const char* format, const char* call_json,
                                    char** out_message_json, char** error);

/** Undoes the session's newest compaction, clearing or reduction not undone yet
 * (Compactor::Uncompact), in one transaction: the originals are active again in their places,
 * the checkpoint (or the reduced copies) retired to the history, messages appended since stay
 * after them; a second call undoes the one before. Emits the event compaction_undone.
 * *out_json: {"undone": true, "commit": "compaction:3", "reason": "manual",
 * "restored_messages", "retired_messages", "before_chars", "after_chars", "version"}. Nothing
 * left to undo is not an error: "undone": false, and nothing changed. A store that cannot undo
 * is RECAP_FAILED_PRECONDITION. The next recap_prepare compacts again when the restored
 * transcript is over the trigger. */
RECAP_C_API int recap_uncompact(recap_compactor* compactor, const char* session, char** out_json,
                                char** error);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RECAP_C_RECAP_H_ */
