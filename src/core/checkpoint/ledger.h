// The ledger's private parts (the public ones are recap/ledger.h): the builder that reads a
// span one message at a time, for a ledger rebuilt from a session's history, and the reading of
// a person's identifiers.
#ifndef RECAP_SRC_CORE_CHECKPOINT_LEDGER_H_
#define RECAP_SRC_CORE_CHECKPOINT_LEDGER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "recap/ledger.h"
#include "recap/message.h"

namespace recap {
inline namespace v0 {

namespace ledger_build {
class Builder;
}  // namespace ledger_build

// BuildLedger one message at a time: Read each message of the span in order, then Finish once.
class LedgerBuilder {
 public:
  explicit LedgerBuilder(const Ledger& carried = {}, std::size_t max_chars = 0);
  ~LedgerBuilder();
  LedgerBuilder(const LedgerBuilder&) = delete;
  LedgerBuilder& operator=(const LedgerBuilder&) = delete;

  void Read(const Message& m);  // a message flagged summary is skipped
  Ledger Finish();

 private:
  std::unique_ptr<ledger_build::Builder> builder_;
};

namespace ledger_internal {

// The identifiers of a person's words, in order, each once.
std::vector<std::string> Identifiers(std::string_view words);

}  // namespace ledger_internal

}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_CHECKPOINT_LEDGER_H_
