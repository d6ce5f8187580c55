/* A host written in C (C99, compiled as C with -pedantic -Werror): it keeps a session in a
 * SQLite file (or in memory when given no path), summarizes with its own "model" (a callback),
 * and runs a per-turn loop of append and prepare until recap compacts, then recalls what it
 * summarized and undoes the compaction. Exits 0 when every check held, 1 with a message
 * otherwise. Run by ctest as capi.c_consumer, and built against the installed package by
 * tests/package/find_package_c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recap/c/recap.h"

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

struct host_model {
  int calls;
  int freed;
};

/* The host's summarizer: it reads nothing of the request but checks its shape. */
static void summarize(void* user_data, const char* request_json, recap_reply* reply) {
  struct host_model* model = (struct host_model*)user_data;
  ++model->calls;
  CHECK(strstr(request_json, "\"system\":") != NULL);
  CHECK(strstr(request_json, "\"max_output_tokens\":") != NULL);
  CHECK(recap_reply_cancelled(reply) == 0);
  CHECK(recap_reply_text(reply, "{\"goal\":\"greet the user\",\"currentState\":\"greeted\"}", 0,
                         100, 10) == RECAP_OK);
}

static void free_model(void* user_data) { ((struct host_model*)user_data)->freed = 1; }

struct event_counts {
  int started;
  int completed;
};

static void on_event(void* user_data, const char* event_json) {
  struct event_counts* counts = (struct event_counts*)user_data;
  if (strstr(event_json, "\"type\":\"compaction_started\"") != NULL) ++counts->started;
  if (strstr(event_json, "\"type\":\"compaction_completed\"") != NULL) ++counts->completed;
}

int main(int argc, char** argv) {
  struct host_model model = {0, 0};
  struct event_counts counts = {0, 0};
  recap_store* store = NULL;
  recap_provider* provider = NULL;
  recap_compactor* compactor = NULL;
  char* error = NULL;
  char* result = NULL;
  char where[4096];
  char turn[4096];
  int i;
  int compacted = 0;

  if (argc > 1) {
    snprintf(where, sizeof where, "sqlite:%s", argv[1]);
  } else {
    snprintf(where, sizeof where, "memory");
  }
  if (recap_store_open(where, &store, &error) != RECAP_OK) {
    fprintf(stderr, "recap_store_open: %s\n", error);
    recap_free(error);
    return 1;
  }
  CHECK(recap_provider_new_callback("c-host", 0, summarize, &model, free_model, &provider,
                                    &error) == RECAP_OK);
  CHECK(recap_compactor_new("{\"provider\":{\"contextWindow\":1500},"
                            "\"compaction\":{\"keepTurns\":1}}",
                            provider, store, on_event, &counts, &compactor, &error) == RECAP_OK);
  if (compactor == NULL) {
    fprintf(stderr, "recap_compactor_new: %s\n", error);
    return 1;
  }
  recap_store_free(store);
  recap_provider_free(provider);
  CHECK(model.freed == 0);

  for (i = 0; i < 8 && !compacted; ++i) {
    uint64_t version = 0;
    recap_sizes sizes;
    sizes.instructions_chars = 40;
    sizes.tool_catalog_chars = 0;
    sizes.profile_context_window = 0;
    snprintf(turn, sizeof turn,
             "[{\"role\":\"user\",\"content\":\"turn %d: %0900d\"},"
             "{\"role\":\"assistant\",\"content\":\"done %d\"}]",
             i, 0, i);
    if (recap_append(compactor, "c-session", "openai-chat", turn, &version, &error) != RECAP_OK) {
      fprintf(stderr, "recap_append: %s\n", error);
      recap_free(error);
      ++failures;
      break;
    }
    CHECK(version > 0);
    if (recap_prepare(compactor, "c-session", "anthropic", &sizes, &result, &error) != RECAP_OK) {
      fprintf(stderr, "recap_prepare: %s (%s)\n", error, recap_code_name(RECAP_INTERNAL));
      recap_free(error);
      ++failures;
      break;
    }
    CHECK(strncmp(result, "{\"messages\":[", 13) == 0);
    if (strstr(result, "\"compactions\":[\"auto\"]") != NULL) {
      compacted = 1;
      CHECK(strstr(result, "greet the user") != NULL);
    }
    recap_free(result);
  }
  CHECK(compacted);
  CHECK(model.calls == 1);
  CHECK(counts.started == 1);
  CHECK(counts.completed == 1);

  /* Getting it back: what the compaction summarized is found by its words, then undone. */
  result = NULL;
  if (recap_recall(compactor, "c-session", "{\"query\":\"turn 0\",\"max_chars\":2000}", &result,
                   &error) == RECAP_OK) {
    CHECK(strstr(result, "\"state\":\"summarized\"") != NULL);
    recap_free(result);
  } else {
    fprintf(stderr, "recap_recall: %s\n", error);
    recap_free(error);
    ++failures;
  }
  result = NULL;
  if (recap_uncompact(compactor, "c-session", &result, &error) == RECAP_OK) {
    CHECK(strstr(result, "\"undone\":true") != NULL);
    recap_free(result);
  } else {
    fprintf(stderr, "recap_uncompact: %s\n", error);
    recap_free(error);
    ++failures;
  }

  /* The body into a buffer the host keeps: the same bytes as recap_prepare, twice in the same
   * memory, the messages located without a scan. */
  {
    recap_buffer* body = recap_buffer_new();
    const char* first = NULL;
    size_t at = 0, length = 0;
    CHECK(body != NULL && recap_buffer_size(body) == 0);
    result = NULL;
    if (body != NULL &&
        recap_append(compactor, "c-body", "openai-chat", "{\"role\":\"user\",\"content\":\"hi\"}",
                     NULL, &error) == RECAP_OK &&
        recap_prepare(compactor, "c-body", "openai-chat", NULL, &result, &error) == RECAP_OK &&
        recap_prepare_to(compactor, "c-body", "openai-chat", NULL, body, &error) == RECAP_OK) {
      CHECK(recap_buffer_size(body) == strlen(result));
      CHECK(memcmp(recap_buffer_data(body), result, strlen(result) + 1) == 0);
      recap_buffer_messages(body, &at, &length);
      CHECK(at == 12 && length > 2 && recap_buffer_data(body)[at] == '[');
      CHECK(recap_buffer_data(body)[at + length - 1] == ']');
      first = recap_buffer_data(body);
      CHECK(recap_prepare_to(compactor, "c-body", "openai-chat", NULL, body, NULL) == RECAP_OK);
      CHECK(recap_buffer_data(body) == first);
    } else {
      fprintf(stderr, "recap_prepare_to: %s\n", error != NULL ? error : "out of memory");
      recap_free(error);
      error = NULL;
      ++failures;
    }
    recap_free(result);
    recap_buffer_free(body);
  }

  /* An error: a code, a message, freed with recap_free. */
  CHECK(recap_append(compactor, "c-session", "yaml", "[]", NULL, &error) == RECAP_INVALID_ARGUMENT);
  CHECK(error != NULL && strstr(error, "unknown format") != NULL);
  recap_free(error);
  CHECK(strcmp(recap_code_name(RECAP_INVALID_ARGUMENT), "invalid_argument") == 0);

  recap_compactor_free(compactor);
  CHECK(model.freed == 1);
  if (failures == 0) printf("c consumer: ok (recap %s, %s)\n", recap_version(), where);
  return failures == 0 ? 0 : 1;
}
