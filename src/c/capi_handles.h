// Private: the C API's handles (include/recap/c/recap.h declares them opaque). They hold
// shared_ptrs, so that a compactor keeps its store and provider alive whatever the host frees
// first.
#ifndef RECAP_SRC_C_CAPI_HANDLES_H_
#define RECAP_SRC_C_CAPI_HANDLES_H_

#include <cstddef>
#include <memory>
#include <string>

#include "recap/c/recap.h"
#include "recap/recap.h"

struct recap_store {
  std::shared_ptr<recap::SessionStore> store;
};

struct recap_provider {
  std::shared_ptr<recap::Provider> provider;
};

struct recap_compactor {
  std::unique_ptr<recap::Compactor> compactor;
};

// What recap_prepare_to writes into, kept by the host from turn to turn: the text (the
// string keeps its memory from one call to the next) and where its messages array lies.
struct recap_buffer {
  std::string bytes;
  std::size_t messages_offset = 0;
  std::size_t messages_length = 0;
};

// One answer of a callback summarizer, filled by recap_reply_text or recap_reply_fail.
struct recap_reply {
  const recap::CancellationToken* cancel = nullptr;
  bool given = false;
  recap::Completion completion;
  recap::Status failure;
};

#endif  // RECAP_SRC_C_CAPI_HANDLES_H_
