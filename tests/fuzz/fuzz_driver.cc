// The stand-alone driver of recap's fuzz targets, for builds without libFuzzer (GCC, and the
// ctest smoke runs of every build). It links with one target's LLVMFuzzerTestOneInput and
// takes a subset of libFuzzer's command line, so scripts and ctest call both alike:
//
//   fuzz_<target> [-max_total_time=S] [-seed=N] [-runs=N] [-timeout=S] [-artifact_prefix=P]
//                 CORPUS_DIR_OR_FILE...
//
// It runs the depth bombs of fuzz_depth_bombs.h (100,000 and 1,000,000 levels, every shape,
// bare and wrapped) and every corpus input once as they are, then mutates them (the
// 100,000-level bombs among them) (byte flips, insertions and
// deletions, cuts, repeats, splices of two inputs, and tokens that stress JSON and UTF-8
// parsers) until the time or the number of runs is used up. Mutation is deterministic for a
// seed, which is printed first; `-seed=N -runs=K` replays a run up to its K-th input. An input
// that crashes (a sanitizer report, a failed invariant, a signal) or runs past -timeout
// seconds is written to <artifact_prefix>crash-<seed>-<run> and the path is printed, so it can
// be added to the corpus as a regression test.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "fuzz_depth_bombs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
// Set by the sanitizers' runtime when the program is built with one; null otherwise.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace {

// The input being run, for the crash handlers (which may only use async-signal-safe calls).
const std::string* g_current = nullptr;
char g_artifact[512] = "";

void WriteArtifact() {
  if (g_current == nullptr || g_artifact[0] == '\0') return;
  const int fd = ::open(g_artifact, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  std::size_t done = 0;
  while (done < g_current->size()) {
    const ssize_t n = ::write(fd, g_current->data() + done, g_current->size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  const char* lead = "fuzz driver: the failing input was written to ";
  (void)!::write(2, lead, std::strlen(lead));
  (void)!::write(2, g_artifact, std::strlen(g_artifact));
  (void)!::write(2, "\n", 1);
}

void OnDeath() { WriteArtifact(); }

void OnSignal(int signal) {
  if (signal == SIGALRM) {
    const char* text = "fuzz driver: an input ran past the -timeout (a hang?)\n";
    (void)!::write(2, text, std::strlen(text));
  }
  WriteArtifact();
  std::signal(signal == SIGALRM ? SIGABRT : signal, SIG_DFL);
  std::raise(signal == SIGALRM ? SIGABRT : signal);
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

void AddPath(const std::string& path, std::vector<std::string>* corpus) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "fuzz driver: cannot read '%s'\n", path.c_str());
    std::exit(2);
  }
  if (S_ISDIR(st.st_mode)) {
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) return;
    std::vector<std::string> names;
    while (dirent* e = ::readdir(dir)) {
      if (e->d_name[0] != '.') names.push_back(path + "/" + e->d_name);
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) AddPath(n, corpus);
    return;
  }
  std::string data;
  if (ReadFile(path, &data)) corpus->push_back(std::move(data));
}

// Tokens that JSON, UTF-8 and SSE parsers have to get right.
const char* const kTokens[] = {
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1e309",
    "-0.0",
    "18446744073709551616",
    "\\u0000",
    "\\ud800",
    "\\udc00\\ud800",
    "\\\"",
    "\\\\",
    "\xC3\xA9",
    "\xE2\x9C\x93",
    "\xF0\x9F\x98\x80",
    "\xC3",
    "\xE2\x9C",
    "\xED\xA0\x80",
    "\xFF",
    "\n",
    "\r\n",
    "\r",
    "data: ",
    "event: ",
    ":\n",
    "\n\n",
    "[DONE]",
    "\"role\"",
    "\"user\"",
    "\"assistant\"",
    "\"tool\"",
    "\"tool_calls\"",
    "\"tool_call_id\"",
    "\"content\"",
    "\"type\"",
    "\"text\"",
    "\"tool_use\"",
    "\"tool_result\"",
    "\"tool_use_id\"",
    "\"id\"",
    "\"name\"",
    "\"arguments\"",
    "\"input\"",
    "\"system\"",
    "\"messages\"",
    "\"goal\"",
    "\"next_steps\"",
    "\"message\"",
    "\"parentUuid\"",
    "\"traj\"",
    "\"history\"",
    "\"data\"",
    "\"context_length\"",
    "\"choices\"",
    "\"delta\"",
    "\"finish_reason\"",
    "\"content_block_delta\"",
    "\"summary\"",
};

std::string Mutate(std::string s, const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < steps; ++i) {
    switch (rng() % 9) {
      case 0:  // flip a bit
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:  // a random byte
        s.insert(pick(s.size() + 1), 1, static_cast<char>(rng() & 0xFF));
        break;
      case 2: {  // delete a range
        if (s.empty()) break;
        const std::size_t at = pick(s.size());
        s.erase(at, 1 + pick(std::min<std::size_t>(64, s.size() - at)));
        break;
      }
      case 3:  // cut the end off (a truncated file or reply)
        s.resize(pick(s.size() + 1));
        break;
      case 4: {  // repeat a range
        if (s.empty()) break;
        const std::size_t at = pick(s.size());
        const std::string piece = s.substr(at, 1 + pick(64));
        s.insert(pick(s.size() + 1), piece);
        break;
      }
      case 5:
      case 6: {  // a token
        const char* token = kTokens[pick(sizeof kTokens / sizeof kTokens[0])];
        s.insert(pick(s.size() + 1), token);
        break;
      }
      case 7: {  // splice with another input
        const std::string& other = corpus[pick(corpus.size())];
        if (other.empty()) break;
        const std::size_t from = pick(other.size());
        s = s.substr(0, pick(s.size() + 1)) + other.substr(from, 1 + pick(4096));
        break;
      }
      case 8: {  // swap two bytes
        if (s.size() < 2) break;
        std::swap(s[pick(s.size())], s[pick(s.size())]);
        break;
      }
    }
  }
  if (s.size() > (1u << 20)) s.resize(1u << 20);
  return s;
}

bool Flag(const char* arg, const char* name, long long* out) {
  const std::size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *out = std::atoll(arg + n + 1);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  long long seconds = 10, seed = -1, runs = -1, timeout = 20;
  std::string prefix = "./";
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (Flag(a, "-max_total_time", &seconds) || Flag(a, "-seed", &seed) ||
        Flag(a, "-runs", &runs) || Flag(a, "-timeout", &timeout)) {
      continue;
    }
    if (std::strncmp(a, "-artifact_prefix=", 17) == 0) {
      prefix = a + 17;
      continue;
    }
    if (a[0] == '-') continue;  // other libFuzzer flags mean nothing here
    AddPath(a, &corpus);
  }
  if (corpus.empty()) corpus.emplace_back();
  // The 100,000-level bombs join the corpus that mutation draws from; the 1,000,000-level ones
  // (megabytes each, too big to mutate) run once, first.
  recap_fuzz::ForEachDepthBomb(100000, [&](const std::string& bomb) { corpus.push_back(bomb); });
  if (seed < 0) {
    seed = static_cast<long long>(std::chrono::steady_clock::now().time_since_epoch().count() &
                                  0x7FFFFFFF);
  }
  std::printf("fuzz driver: seed %lld, %zu corpus inputs, %lld s (replay: -seed=%lld)\n", seed,
              corpus.size(), seconds, seed);
  std::fflush(stdout);

  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(OnDeath);
  // On a stack of its own: a stack overflow (the crash a depth bomb causes) leaves no room on
  // the program's stack to write the failing input.
  static std::vector<char> alt_stack(1 << 16);
  stack_t ss{};
  ss.ss_sp = alt_stack.data();
  ss.ss_size = alt_stack.size();
  ::sigaltstack(&ss, nullptr);
  for (int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGALRM}) {
    struct sigaction action {};
    action.sa_handler = OnSignal;
    action.sa_flags = SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    ::sigaction(s, &action, nullptr);
  }

  std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  long long run = 0;
  auto run_one = [&](const std::string& input) {
    std::snprintf(g_artifact, sizeof g_artifact, "%scrash-%lld-%lld", prefix.c_str(), seed, run);
    g_current = &input;
    ::alarm(static_cast<unsigned>(timeout));
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
    ::alarm(0);
    g_current = nullptr;
    ++run;
  };
  recap_fuzz::ForEachDepthBomb(1000000, [&](const std::string& bomb) { run_one(bomb); });
  for (const std::string& input : corpus) run_one(input);
  const long long replayed = run;
  while ((runs < 0 || run < runs) && std::chrono::steady_clock::now() < deadline) {
    const std::string input = Mutate(corpus[rng() % corpus.size()], corpus, rng);
    run_one(input);
  }
  std::printf(
      "fuzz driver: %lld inputs run (%lld from the depth bombs and the corpus), no failure\n", run,
      replayed);
  return 0;
}
