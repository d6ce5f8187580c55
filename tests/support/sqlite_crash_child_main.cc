// Not a test: the program the crash test (tests/sqlite/test_sqlite_crash.cc) starts and kills. The
// checks are the test's: it compares what this program acknowledged with what the database
// holds. It opens the SQLite store at argv[1] and runs the deterministic ops of
// tests/support/crash_ops.h for seed argv[2] on one session, forever (or, with argv[3], until
// that many ops have run in total), continuing from the op the database is at. Once the store
// is open and the session loaded it writes "open\n"; after op k returns OK it writes "k\n",
// each line with one write(2), so a parent that kills it knows which ops were acknowledged.
//
// Exit codes: 0 the op limit was reached; 2 bad arguments; 3 the store did not open or load;
// 4 an op failed; 5 an op returned an unexpected version. The reason goes to stderr.
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "recap/sqlite/sqlite_store.h"

#include "support/crash_ops.h"

namespace crash = recap::testing::crash;

namespace {

// One write(2): a line reaches the pipe whole or not at all.
void WriteLine(const std::string& line) {
  ssize_t written;
  do {
    written = ::write(STDOUT_FILENO, line.data(), line.size());
  } while (written < 0 && errno == EINTR);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s DB_PATH SEED [TOTAL_OPS]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const std::uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const std::uint64_t limit = argc == 4 ? std::strtoull(argv[3], nullptr, 10) : UINT64_MAX;

  auto opened = recap::OpenSqliteSessionStore(path);
  if (!opened.ok()) {
    std::fprintf(stderr, "crash child: open: %s\n", opened.status().ToString().c_str());
    return 3;
  }
  std::shared_ptr<recap::SessionStore> store = std::move(opened).value();
  auto state = store->Load(crash::kSession);
  if (!state.ok()) {
    std::fprintf(stderr, "crash child: load: %s\n", state.status().ToString().c_str());
    return 3;
  }
  recap::Transcript transcript = state->transcript;
  std::uint64_t k = state->version;
  WriteLine("open\n");
  while (k < limit) {
    const crash::Op op = crash::MakeOp(seed, k, transcript);
    auto done = crash::ApplyOp(*store, op);
    if (!done.ok()) {
      std::fprintf(stderr, "crash child: op %" PRIu64 ": %s\n", k,
                   done.status().ToString().c_str());
      return 4;
    }
    if (*done != k + 1) {
      std::fprintf(stderr, "crash child: op %" PRIu64 " returned version %" PRIu64 "\n", k, *done);
      return 5;
    }
    WriteLine(std::to_string(k) + "\n");
    auto next = store->Load(crash::kSession);
    if (!next.ok()) {
      std::fprintf(stderr, "crash child: load after op %" PRIu64 ": %s\n", k,
                   next.status().ToString().c_str());
      return 3;
    }
    if (next->version != k + 1) {
      std::fprintf(stderr, "crash child: version %" PRIu64 " after op %" PRIu64 "\n", next->version,
                   k);
      return 5;
    }
    transcript = next->transcript;
    ++k;
  }
  return 0;
}
