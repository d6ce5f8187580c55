#include "w1_workload.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <variant>

namespace recap_bench {
namespace {

using recap::Message;
using recap::ToolCall;

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  std::uint64_t Below(std::uint64_t n) {
    return n == 0 ? 0 : engine_() % n;
  }  // bias is irrelevant here
  std::size_t Between(std::size_t lo, std::size_t hi) { return lo + Below(hi - lo + 1); }
  bool OneIn(std::uint64_t n) { return Below(n) == 0; }
  double Unit() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Box–Muller; implemented here so the sizes do not depend on the standard library.
  double Normal() {
    double u1 = Unit();
    double u2 = Unit();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::mt19937_64 engine_;
};

void AppendUtf8(std::string& s, char32_t c) {
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// Two pools of prose, sliced at random offsets: generating 50 MB character by character
// would dominate the benchmark's start-up. Neither contains '"', '\\' or control characters,
// so any slice can sit inside a JSON string.
class TextPools {
 public:
  explicit TextPools(Rng& rng) {
    std::vector<std::string> words;
    for (int i = 0; i < 400; ++i) {
      std::string w;
      std::size_t len = rng.Between(2, 10);
      for (std::size_t j = 0; j < len; ++j) w += static_cast<char>('a' + rng.Below(26));
      words.push_back(std::move(w));
    }
    while (ascii_.size() < (1u << 20)) {
      ascii_ += words[rng.Below(words.size())];
      std::uint64_t p = rng.Below(20);
      ascii_ += p == 0 ? ". " : p == 1 ? ", " : p == 2 ? ": " : " ";
    }
    // Multi-byte: words of Latin-1 accents (2 bytes), Cyrillic (2), CJK (3) and emoji (4),
    // mixed with ASCII words.
    while (multi_offsets_.size() < 400000) {
      std::uint64_t kind = rng.Below(5);
      std::size_t len = rng.Between(2, 8);
      for (std::size_t j = 0; j < len; ++j) {
        char32_t c;
        switch (kind) {
          case 0: c = static_cast<char32_t>('a' + rng.Below(26)); break;
          case 1: c = static_cast<char32_t>(0xE0 + rng.Below(0x20)); break;
          case 2: c = static_cast<char32_t>(0x430 + rng.Below(0x20)); break;
          case 3: c = static_cast<char32_t>(0x4E00 + rng.Below(0x5000)); break;
          default: c = static_cast<char32_t>(0x1F600 + rng.Below(0x50)); break;
        }
        multi_offsets_.push_back(multi_.size());
        AppendUtf8(multi_, c);
      }
      multi_offsets_.push_back(multi_.size());
      multi_ += ' ';
    }
    multi_offsets_.push_back(multi_.size());
  }

  // `chars` characters of prose.
  std::string Chars(Rng& rng, std::size_t chars, bool multibyte) const {
    if (!multibyte) return AsciiSlice(rng, chars);
    std::size_t cps = multi_offsets_.size() - 1;
    chars = std::min(chars, cps);
    std::size_t start = rng.Below(cps - chars + 1);
    return multi_.substr(multi_offsets_[start],
                         multi_offsets_[start + chars] - multi_offsets_[start]);
  }

  // About `bytes` bytes of prose (exactly, when ASCII; whole characters when multi-byte).
  std::string Bytes(Rng& rng, std::size_t bytes, bool multibyte) const {
    if (!multibyte) return AsciiSlice(rng, bytes);
    bytes = std::min(bytes, multi_.size());
    std::size_t start = rng.Below(multi_.size() - bytes + 1);
    std::size_t end = start + bytes;
    auto continuation = [&](std::size_t i) {
      return i < multi_.size() && (static_cast<unsigned char>(multi_[i]) & 0xC0) == 0x80;
    };
    while (continuation(start)) ++start;
    while (end > start && continuation(end)) --end;
    return multi_.substr(start, end - start);
  }

 private:
  std::string AsciiSlice(Rng& rng, std::size_t n) const {
    n = std::min(n, ascii_.size());
    return ascii_.substr(rng.Below(ascii_.size() - n + 1), n);
  }

  std::string ascii_;
  std::string multi_;
  std::vector<std::size_t> multi_offsets_;  // byte offset of each code point, plus the end
};

class W1Generator {
 public:
  explicit W1Generator(std::uint64_t seed) : rng_(seed), pools_(rng_) {}

  std::vector<Message> Turn() {
    std::vector<Message> turn;
    turn.push_back(Message::UserText(TextOf(rng_.Between(200, 2000))));
    bool parallel = rng_.OneIn(5);  // parallel calls in one turn in five
    std::uint64_t r = rng_.Below(20);
    int rounds = r < 4 ? 0 : r < 12 ? 1 : r < 17 ? 2 : 3;
    for (int i = 0; i < rounds; ++i) {
      bool mb = MultiByte();
      std::size_t calls = parallel ? rng_.Between(2, 4) : 1;
      std::vector<ToolCall> tool_calls;
      for (std::size_t c = 0; c < calls; ++c) {
        ToolCall call;
        call.id = "call_" + std::to_string(next_call_++);
        call.name = kToolNames[rng_.Below(6)];
        call.arguments = Arguments(rng_.Between(100, 2000), mb);
        tool_calls.push_back(std::move(call));
      }
      std::string text = rng_.Below(10) < 3 ? pools_.Chars(rng_, rng_.Between(200, 2000), mb) : "";
      std::vector<std::string> ids;
      for (const ToolCall& c : tool_calls) ids.push_back(c.id);
      turn.push_back(Message::AssistantCalls(std::move(tool_calls), std::move(text)));
      for (const std::string& id : ids) {
        turn.push_back(Message::ToolOutput(id, pools_.Bytes(rng_, ResultBytes(), MultiByte()),
                                           rng_.OneIn(20)));
      }
    }
    turn.push_back(Message::AssistantText(TextOf(rng_.Between(200, 2000))));
    return turn;
  }

  std::string TextOf(std::size_t chars) { return pools_.Chars(rng_, chars, MultiByte()); }

 private:
  static constexpr const char* kToolNames[] = {"read_file", "grep",     "run_shell",
                                               "edit_file", "list_dir", "web_fetch"};

  bool MultiByte() { return rng_.OneIn(10); }  // one message in ten

  // Log-normal: median 1.5 KB, sigma 1.5 (natural log), clamped to [100 B, 200 KB].
  std::size_t ResultBytes() {
    double size = 1500.0 * std::exp(1.5 * rng_.Normal());
    return static_cast<std::size_t>(std::clamp(size, 100.0, 200000.0));
  }

  // A JSON object of about `chars` characters.
  std::string Arguments(std::size_t chars, bool mb) {
    std::string head = "{\"path\":\"src/" + pools_.Chars(rng_, 8, false) + ".cc\",\"content\":\"";
    std::size_t fill = chars > head.size() + 2 ? chars - head.size() - 2 : 1;
    return head + pools_.Chars(rng_, fill, mb) + "\"}";
  }

  Rng rng_;
  TextPools pools_;
  std::uint64_t next_call_ = 0;
};

}  // namespace

std::vector<Message> GenerateW1(const W1Options& options) {
  W1Generator gen(options.seed);
  std::vector<Message> out;
  std::size_t n = options.messages;
  std::size_t body = n >= 2 ? n - 2 : 0;
  while (true) {
    std::vector<Message> turn = gen.Turn();
    if (out.size() + turn.size() > body) break;
    for (Message& m : turn) out.push_back(std::move(m));
  }
  // Fill up with plain texts, ending with a user text and an assistant reply.
  while (out.size() < n) {
    std::string text = gen.TextOf(500);
    out.push_back((n - out.size()) % 2 == 0 ? Message::UserText(std::move(text))
                                            : Message::AssistantText(std::move(text)));
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "w1-%06zu", i);
    out[i].id = id;
  }
  return out;
}

std::size_t MessageBytes(const Message& m) {
  std::size_t bytes = m.id.size() + m.extra.size();
  for (const recap::Part& part : m.parts) {
    if (const auto* t = std::get_if<recap::Text>(&part)) {
      bytes += t->text.size();
    } else if (const auto* c = std::get_if<recap::ToolCall>(&part)) {
      bytes += c->id.size() + c->name.size() + c->arguments.size();
    } else if (const auto* r = std::get_if<recap::ToolResult>(&part)) {
      bytes += r->call_id.size();
      for (const recap::ResultItem& item : r->content) {
        if (const auto* rt = std::get_if<recap::Text>(&item)) bytes += rt->text.size();
        if (const auto* ro = std::get_if<recap::Opaque>(&item)) bytes += ro->payload.size();
      }
    } else if (const auto* o = std::get_if<recap::Opaque>(&part)) {
      bytes += o->kind.size() + o->payload.size();
    }
  }
  return bytes;
}

}  // namespace recap_bench
