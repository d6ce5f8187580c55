// Issue 22: what a host pays per turn for the request body, and through each path.
//
// Sessions of W1 (w1_workload.h): its first 2,000 messages, all 20,000, and the longest prefix
// within limits.maxContextChars' default of 800,000 characters (what a compacted session holds
// at most). At every turn one message is appended (not timed), then one of these is timed, in
// an order shuffled per round so that drift hits every figure alike:
//
//   prepare        Compactor::Prepare with nothing to do (limits.maxContextChars = 10^9)
//   body before    Prepare, then what a host had to do for the body: Transcript::ToVector()
//                  (a deep copy) and openai_chat::EncodeMessages of the whole transcript
//   body after     Prepare, then openai_chat::EncodeTranscript: each message's kept encoded
//                  form plus the new message's, in a new string
//   into kept      Prepare, then openai_chat::EncodeTranscriptTo into one string kept from
//                  turn to turn (issue 39): the same bytes, in memory already mapped
//   new copy       one copy of the body's bytes into a new string: what any body assembled
//                  in new memory pays at least (past glibc's mmap threshold, new pages faulted
//                  in one by one)
//   kept copy      one copy of the body's bytes into a string kept from turn to turn, its
//                  pages faulted in before the first turn: the floor of any body assembled in
//                  memory
//   C API          recap_prepare(…, "openai-chat", …): the body plus the figures as one JSON
//                  text in new memory the caller frees (include/recap/c/recap.h)
//   C API kept     recap_prepare_to(…, "openai-chat", …) into one recap_buffer kept from turn
//                  to turn: the same text, in memory already mapped
//
// Medians of the timed turns; the ratios are taken within this run (the `/ floor` columns
// against `kept copy`). The Python module's figures are bench/bench_python.py's (it drives the
// same C API). No budget: comparisons only.
//
// Flags:
//   --recap_smoke         tiny sizes and few turns (the `bench` ctest)
//   --recap_turns=N       timed turns per figure and size (default 40; `body before` on 20,000
//                         messages takes N/8, it costs ~0.4 s a turn)
//   --recap_json=FILE     also write the figures as JSON comparisons, one object a line
//   --recap_w1_json=FILE  write W1's messages (recap's own JSON form) to FILE and exit: the
//                         Python module's benchmark (bench/bench_python.py) reads them
// Exit status: 0, or 2 when an operation failed.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "recap/c/recap.h"
#include "recap/codec.h"
#include "recap/compactor.h"
#include "recap/config.h"
#include "recap/measure.h"
#include "recap/session_store.h"

#include "bench_support.h"
#include "w1_workload.h"

namespace {

using Clock = std::chrono::steady_clock;
using recap::Message;

template <typename T>
T Value(recap::Result<T> r, const char* what) {
  if (!r.ok()) throw std::runtime_error(std::string(what) + ": " + r.status().ToString());
  return std::move(*r);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Figure {
  Figure(std::string n, std::function<void()> t) : name(std::move(n)), turn(std::move(t)) {}
  std::string name;
  std::function<void()> turn;  // timed
  int turns = 0;
  std::vector<double> seconds;
};

struct Row {
  std::string session;
  std::size_t messages = 0;
  std::size_t body_bytes = 0;
  double prepare = 0, before = 0, after = 0, into = 0, copy = 0, floor = 0, capi = 0, capi_to = 0;
};

// One session of `messages` W1 messages, served by a C++ Compactor and by a C API compactor
// over the same store.
Row Measure(const std::vector<Message>& w1, std::size_t messages, const std::string& label,
            int turns, std::mt19937_64& rng) {
  auto store = recap::NewInMemorySessionStore();
  const std::string session = "w1";
  for (std::size_t i = 0; i < messages; i += 500) {
    std::vector<Message> batch(
        w1.begin() + static_cast<std::ptrdiff_t>(i),
        w1.begin() + static_cast<std::ptrdiff_t>(std::min(i + 500, messages)));
    Value(store->AppendMessages(session, std::move(batch)), "AppendMessages");
  }
  recap::Config config;
  config.limits.max_context_chars = 1000000000;
  auto compactor = Value(recap::Compactor::Create(config, nullptr, store), "Compactor::Create");

  // The C API over the same sessions: a compactor of its own on a store of its own holding the
  // same messages (the C API opens its stores itself).
  recap_compactor* c = nullptr;
  char* error = nullptr;
  if (recap_compactor_new(R"({"limits":{"maxContextChars":1000000000}})", nullptr, nullptr, nullptr,
                          nullptr, &c, &error) != RECAP_OK) {
    throw std::runtime_error(std::string("recap_compactor_new: ") + error);
  }
  std::unique_ptr<recap_compactor, void (*)(recap_compactor*)> owned(c, recap_compactor_free);
  std::unique_ptr<recap_buffer, void (*)(recap_buffer*)> kept_buffer(recap_buffer_new(),
                                                                     recap_buffer_free);
  if (kept_buffer == nullptr) throw std::runtime_error("recap_buffer_new: out of memory");
  {
    recap::Conversation all;
    all.messages.assign(w1.begin(), w1.begin() + static_cast<std::ptrdiff_t>(messages));
    const std::string json = Value(recap::native::EncodeMessages(all), "EncodeMessages");
    if (recap_append(c, session.c_str(), "recap", json.c_str(), nullptr, &error) != RECAP_OK) {
      throw std::runtime_error(std::string("recap_append: ") + error);
    }
  }

  recap::RequestSizes sizes;
  sizes.instructions_chars = 2000;
  // First calls load and encode the sessions (a host's first turn).
  Value(compactor->Prepare(session, sizes), "Prepare");
  {
    const recap::Prepared p = Value(compactor->Prepare(session, sizes), "Prepare");
    Value(recap::openai_chat::EncodeTranscript(p.messages), "EncodeTranscript");
    char* out = nullptr;
    recap_sizes cs{2000, 0, 0};
    if (recap_prepare(c, session.c_str(), "openai-chat", &cs, &out, &error) != RECAP_OK) {
      throw std::runtime_error(std::string("recap_prepare: ") + error);
    }
    recap_free(out);
  }

  Row row;
  row.session = label;
  row.messages = messages;
  std::size_t k = 0;
  auto append_one = [&] {
    const std::string text = "turn " + std::to_string(k++) + " " + std::string(500, 'x');
    Value(store->Append(session, Message::UserText(text)), "Append");
    const std::string json = "[{\"role\":\"user\",\"content\":\"" + text + "\"}]";
    if (recap_append(c, session.c_str(), "openai-chat", json.c_str(), nullptr, &error) !=
        RECAP_OK) {
      throw std::runtime_error(std::string("recap_append: ") + error);
    }
  };
  std::string body;
  std::string kept_body;  // EncodeTranscriptTo's, kept from turn to turn
  std::string kept_copy;  // the floor's, kept from turn to turn
  std::vector<Figure> figures;
  figures.emplace_back("prepare", [&] {
    recap::Prepared p = Value(compactor->Prepare(session, sizes), "Prepare");
    benchmark::DoNotOptimize(p.messages.size());
  });
  figures.emplace_back("body before", [&] {
    recap::Prepared p = Value(compactor->Prepare(session, sizes), "Prepare");
    recap::Conversation conv;
    conv.messages = p.messages.ToVector();
    std::string b = Value(recap::openai_chat::EncodeMessages(conv), "EncodeMessages");
    benchmark::DoNotOptimize(b.data());
  });
  figures.emplace_back("body after", [&] {
    recap::Prepared p = Value(compactor->Prepare(session, sizes), "Prepare");
    body = Value(recap::openai_chat::EncodeTranscript(p.messages), "EncodeTranscript");
    benchmark::DoNotOptimize(body.data());
  });
  figures.emplace_back("into kept", [&] {
    recap::Prepared p = Value(compactor->Prepare(session, sizes), "Prepare");
    const recap::Status s = recap::openai_chat::EncodeTranscriptTo(p.messages, 0, &kept_body);
    if (!s.ok()) throw std::runtime_error("EncodeTranscriptTo: " + s.ToString());
    benchmark::DoNotOptimize(kept_body.data());
  });
  figures.emplace_back("new copy", [&] {
    std::string copy(body);
    benchmark::DoNotOptimize(copy.data());
    benchmark::ClobberMemory();
  });
  figures.emplace_back("kept copy", [&] {
    kept_copy.assign(body);
    benchmark::DoNotOptimize(kept_copy.data());
    benchmark::ClobberMemory();
  });
  figures.emplace_back("C API", [&] {
    char* out = nullptr;
    recap_sizes cs{2000, 0, 0};
    if (recap_prepare(c, session.c_str(), "openai-chat", &cs, &out, &error) != RECAP_OK) {
      throw std::runtime_error(std::string("recap_prepare: ") + error);
    }
    benchmark::DoNotOptimize(out);
    recap_free(out);
  });
  figures.emplace_back("C API kept", [&] {
    recap_sizes cs{2000, 0, 0};
    if (recap_prepare_to(c, session.c_str(), "openai-chat", &cs, kept_buffer.get(), &error) !=
        RECAP_OK) {
      throw std::runtime_error(std::string("recap_prepare_to: ") + error);
    }
    benchmark::DoNotOptimize(recap_buffer_data(kept_buffer.get()));
  });
  // `body before` re-encodes everything every turn: fewer turns on big sessions.
  for (Figure& f : figures) {
    f.turns = f.name == "body before" && messages > 5000 ? std::max(3, turns / 8) : turns;
  }
  // The copies need a body first. Every kept string and buffer is written once before the
  // timed turns, as a host's first turn writes it; the floor's is given room for the turns'
  // growth and its pages are faulted in (a copy into it never meets a new page).
  figures[2].turn();
  figures[3].turn();
  figures[7].turn();
  kept_copy.reserve(body.size() + body.size() / 4 + (1 << 20));
  kept_copy.assign(kept_copy.capacity(), ' ');

  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < figures.size(); ++i) order.push_back(i);
  for (int round = 0; round < turns; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i : order) {
      Figure& f = figures[i];
      if (static_cast<int>(f.seconds.size()) >= f.turns) continue;
      append_one();
      const auto t0 = Clock::now();
      f.turn();
      f.seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }
  row.body_bytes = body.size();
  row.prepare = Median(figures[0].seconds);
  row.before = Median(figures[1].seconds);
  row.after = Median(figures[2].seconds);
  row.into = Median(figures[3].seconds);
  row.copy = Median(figures[4].seconds);
  row.floor = Median(figures[5].seconds);
  row.capi = Median(figures[6].seconds);
  row.capi_to = Median(figures[7].seconds);
  return row;
}

std::string Ms(double s) {
  char buf[32];
  if (s < 0.001) {
    std::snprintf(buf, sizeof buf, "%.1f µs", s * 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  }
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = std::getenv("RECAP_BENCH_SMOKE") != nullptr;
  int turns = -1;
  std::string json_path;
  std::string w1_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string value;
    if (arg == "--recap_smoke") {
      smoke = true;
    } else if (recap_bench::TakeFlag(arg, "recap_turns", &value)) {
      turns = static_cast<int>(std::strtol(value.c_str(), nullptr, 10));
    } else if (recap_bench::TakeFlag(arg, "recap_json", &value)) {
      json_path = value;
    } else if (recap_bench::TakeFlag(arg, "recap_w1_json", &value)) {
      w1_path = value;
    } else if (recap_bench::TakeFlag(arg, "recap_dir", &value) ||
               recap_bench::TakeFlag(arg, "recap_repetitions", &value) ||
               arg.rfind("--benchmark_", 0) == 0) {
      // one run, no files: the figures are compared within it
    } else {
      std::fprintf(stderr, "recap_bench_reach: unknown flag %s (see the top of bench_reach.cc)\n",
                   arg.c_str());
      return 2;
    }
  }
  if (turns <= 0) turns = smoke ? 4 : 40;
  try {
    recap_bench::W1Options w1o;
    w1o.messages = smoke ? 400 : 20000;
    const std::vector<Message> w1 = recap_bench::GenerateW1(w1o);
    if (!w1_path.empty()) {
      recap::Conversation all;
      all.messages = w1;
      std::ofstream out(w1_path, std::ios::binary);
      out << Value(recap::native::EncodeMessages(all), "EncodeMessages");
      if (!out.flush()) throw std::runtime_error("could not write " + w1_path);
      return 0;
    }
    std::size_t within = 0;
    for (std::size_t chars = 0; within < w1.size(); ++within) {
      chars += recap::MessageChars(w1[within]);
      if (chars > 800000) break;
    }
    std::mt19937_64 rng(20261205);
    std::vector<Row> rows;
    rows.push_back(Measure(w1, smoke ? 40 : 2000, smoke ? "W1 40" : "W1 2,000", turns, rng));
    rows.push_back(Measure(w1, smoke ? 400 : 20000, smoke ? "W1 400" : "W1 20,000", turns, rng));
    rows.push_back(Measure(w1, within, "W1 within 800,000 chars", turns, rng));

    std::printf(
        "\nrecap_bench_reach: the request body per turn (openai-chat), medians of %d turns, one "
        "message appended before each\n",
        turns);
    std::printf("  %-24s %9s %11s %10s %11s %10s %10s %10s %10s %10s %10s %12s %12s %12s\n",
                "session", "messages", "body bytes", "prepare", "body before", "body after",
                "into kept", "new copy", "kept copy", "C API", "C API kept", "after / floor",
                "into / floor", "C kept / floor");
    for (const Row& r : rows) {
      std::printf(
          "  %-24s %9zu %11s %10s %11s %10s %10s %10s %10s %10s %10s %12.2fx %11.2fx %13.2fx\n",
          r.session.c_str(), r.messages,
          recap_bench::Grouped(static_cast<double>(r.body_bytes)).c_str(), Ms(r.prepare).c_str(),
          Ms(r.before).c_str(), Ms(r.after).c_str(), Ms(r.into).c_str(), Ms(r.copy).c_str(),
          Ms(r.floor).c_str(), Ms(r.capi).c_str(), Ms(r.capi_to).c_str(), r.after / r.floor,
          r.into / r.floor, r.capi_to / r.floor);
    }
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << "{\"comparisons\": [\n";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        out << "  {\"id\": " << recap_bench::JsonString("reach/" + r.session)
            << ", \"messages\": " << r.messages << ", \"body_bytes\": " << r.body_bytes
            << ", \"prepare_s\": " << r.prepare << ", \"body_before_s\": " << r.before
            << ", \"body_after_s\": " << r.after << ", \"into_kept_s\": " << r.into
            << ", \"plain_copy_s\": " << r.copy << ", \"kept_copy_s\": " << r.floor
            << ", \"c_api_s\": " << r.capi << ", \"c_api_kept_s\": " << r.capi_to << "}"
            << (i + 1 < rows.size() ? "," : "") << "\n";
      }
      out << "]}\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recap_bench_reach: %s\n", e.what());
    return 2;
  }
  return 0;
}
