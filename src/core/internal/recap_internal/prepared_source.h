// A MessageSource whose messages arrive already prepared the way every store prepares a new
// session's messages (internal::NewSessionReader): the work done where the messages are made,
// on a thread of the source's own, instead of again on the thread that writes them. recap's
// command-line import is its one user: its decoding thread measures each message and checks it
// anyway, and the store's thread is the one an import waits for. Header-only, so the command
// needs no exported symbol for it; a store that does not recognise it (it is found with
// dynamic_cast) reads it as any MessageSource, through Next, and prepares the messages itself.
#ifndef RECAP_SRC_CORE_RECAP_INTERNAL_PREPARED_SOURCE_H_
#define RECAP_SRC_CORE_RECAP_INTERNAL_PREPARED_SOURCE_H_

#include <cstddef>

#include "recap/message.h"
#include "recap/session_store.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {
namespace internal {

class PreparedMessageSource : public MessageSource {
 public:
  // What a prepared message comes with.
  struct Facts {
    std::size_t chars = 0;  // MessageChars of the message
    bool fresh_id = false;  // its id was empty and the source gave it NewMessageId()
  };

  // Sets *out to the next message and *facts to what is known of it, and returns true, or
  // returns false at the end; a Status that is not OK abandons the call, as Next's does. Every
  // message given is already what NewSessionReader would make of it, except for the checks
  // that need the whole session (an id given twice) and the pinned checks: each of its strings
  // is valid UTF-8, no two of its calls share an id (RepeatedCallId is empty), and its id is
  // either one it was given or, with facts->fresh_id, a fresh one. Builds without NDEBUG check
  // all of it in the store.
  virtual Result<bool> NextPrepared(Message* out, Facts* facts) = 0;

  Result<bool> Next(Message* out) final {
    Facts facts;
    return NextPrepared(out, &facts);
  }
};

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_RECAP_INTERNAL_PREPARED_SOURCE_H_
