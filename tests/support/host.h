// CompactorHost: a Compactor as a test's host holds it, with the parts a test drives and reads
// it through — its store, its summarizer, a RecordingSink receiving its events and, when the
// test gives one, its clock. A test file derives its own `Host` from it when it adds the turns
// its sessions are made of (each file's own shape) or waits of its own.
//
// The summarizer is a P: by default a ScriptedProvider, made here unless the test gives one (an
// abstract P, e.g. Provider for an HTTP provider, must be given). The store is the one of
// support/test_store.h (in-memory, or SQLite / PostgreSQL with RECAP_TEST_STORE) unless the test
// gives one (a store shared with another host, one that injects faults). The clock is the
// machine's unless the test gives one.
//
//   recap::testing::CompactorHost<> h(config);
//   h.Append("s", {Message::UserText("question"), Message::AssistantText("answer")});
//   const Prepared p = h.Prepare("s");
//   CHECK(h.provider->calls() == 1);
//   CHECK(h.sink->OfType("compaction_completed").size() == 1);
//
// A test executable that includes this header links support/test_store.cc.
#ifndef RECAP_TESTS_SUPPORT_HOST_H_
#define RECAP_TESTS_SUPPORT_HOST_H_

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/compactor.h"
#include "recap/config.h"
#include "recap/session_store.h"
#include "recap/time_source.h"
#include "recap/transcript.h"

#include "support/fake_provider.h"
#include "support/ok.h"
#include "support/recording_sink.h"
#include "support/test_store.h"

namespace recap::testing {

// What a host is made of beyond its Config; a null part is made by the host (see above).
template <class P = ScriptedProvider>
struct HostParts {
  std::shared_ptr<P> provider;
  std::shared_ptr<SessionStore> store;
  std::shared_ptr<TimeSource> clock;
};

template <class P = ScriptedProvider>
struct CompactorHost {
  std::shared_ptr<P> provider;
  std::shared_ptr<SessionStore> store;
  std::shared_ptr<RecordingSink> sink = std::make_shared<RecordingSink>();
  std::unique_ptr<Compactor> compactor;

  explicit CompactorHost(const Config& config, HostParts<P> parts = {})
      : provider(parts.provider ? std::move(parts.provider) : NewProvider()),
        store(parts.store ? std::move(parts.store) : NewTestSessionStore()) {
    compactor = Ok(Compactor::Create(config, provider, store, {}, {sink}, std::move(parts.clock)));
  }

  // One message at the end of `session`.
  void Append(const std::string& session, Message message) {
    REQUIRE(store->Append(session, std::move(message)).ok());
  }
  // Messages at the end of `session`, in one AppendMessages call.
  void Append(const std::string& session, std::vector<Message> messages) {
    REQUIRE(store->AppendMessages(session, std::move(messages)).ok());
  }
  // Prepare(session) with no options; REQUIREs it OK.
  Prepared Prepare(const std::string& session = "s") { return Ok(compactor->Prepare(session, {})); }

 private:
  static std::shared_ptr<P> NewProvider() {
    if constexpr (std::is_abstract_v<P>) {
      FAIL("CompactorHost: an abstract provider type must be given");
      return nullptr;
    } else {
      return std::make_shared<P>();
    }
  }
};

}  // namespace recap::testing

#endif  // RECAP_TESTS_SUPPORT_HOST_H_
