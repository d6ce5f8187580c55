#include "recap_internal/body_codec.h"

#include <cstdint>
#include <functional>
#include <utility>

namespace recap {
inline namespace v0 {
namespace internal {
namespace {

constexpr unsigned char kFormat = 1;
// Format 2 is format 1 with a varint of flags after the form: bit 0, pinned (R12.1). It is
// written only for a message with a flag set, so that every other body stays readable by a
// recap that knows format 1 alone.
constexpr unsigned char kFormatWithFlags = 2;
constexpr std::uint64_t kFlagPinned = 1;
// Bits 1-2: the message's Origin (kNone is 0, so a message without one writes format 1).
constexpr unsigned kOriginShift = 1;
constexpr std::uint64_t kOriginMask = std::uint64_t{3} << kOriginShift;
constexpr std::uint64_t kKnownFlags = kFlagPinned | kOriginMask;
constexpr unsigned char kTagText = 0;
constexpr unsigned char kTagCall = 1;
constexpr unsigned char kTagResult = 2;
constexpr unsigned char kTagOpaque = 3;

// The Put functions write to any `out` with push_back(char) and append(const char*, size_t):
// a std::string (EncodeBody), a counter (EncodedBodySize) or a piece writer (EncodeBodyPieces).
template <typename Out>
void PutVarint(Out& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

template <typename Out>
void PutByte(Out& out, unsigned v) {
  out.push_back(static_cast<char>(v));
}

template <typename Out>
void PutString(Out& out, std::string_view s) {
  PutVarint(out, s.size());
  out.append(s.data(), s.size());
}

template <typename Out>
void PutText(Out& out, const Text& t) {
  PutString(out, t.text);
  PutString(out, t.extra);
}

template <typename Out>
void PutOpaque(Out& out, const Opaque& o) {
  PutString(out, o.kind);
  PutString(out, o.payload);
  PutByte(out, static_cast<unsigned>(o.link));
  PutString(out, o.link_id);
}

template <typename Out>
void Put(Out& out, const Message& m) {
  const std::uint64_t flags =
      (m.pinned ? kFlagPinned : 0) | (static_cast<std::uint64_t>(m.origin) << kOriginShift);
  PutByte(out, flags != 0 ? kFormatWithFlags : kFormat);
  PutString(out, m.id);
  PutByte(out, static_cast<unsigned>(m.role));
  PutByte(out, m.summary ? 1 : 0);
  PutByte(out, static_cast<unsigned>(m.form));
  if (flags != 0) PutVarint(out, flags);
  PutString(out, m.extra);
  PutVarint(out, m.parts.size());
  for (const Part& part : m.parts) {
    if (const auto* t = std::get_if<Text>(&part)) {
      PutByte(out, kTagText);
      PutText(out, *t);
    } else if (const auto* c = std::get_if<ToolCall>(&part)) {
      PutByte(out, kTagCall);
      PutString(out, c->id);
      PutString(out, c->name);
      PutString(out, c->arguments);
      PutString(out, c->extra);
    } else if (const auto* res = std::get_if<ToolResult>(&part)) {
      PutByte(out, kTagResult);
      PutString(out, res->call_id);
      PutByte(out, res->is_error ? 1 : 0);
      PutByte(out, static_cast<unsigned>(res->form));
      PutString(out, res->extra);
      PutVarint(out, res->content.size());
      for (const ResultItem& item : res->content) {
        if (const auto* it = std::get_if<Text>(&item)) {
          PutByte(out, kTagText);
          PutText(out, *it);
        } else {
          PutByte(out, kTagOpaque);
          PutOpaque(out, std::get<Opaque>(item));
        }
      }
    } else {
      PutByte(out, kTagOpaque);
      PutOpaque(out, std::get<Opaque>(part));
    }
  }
}

struct Counter {
  std::size_t n = 0;
  void push_back(char) { ++n; }
  void append(const char*, std::size_t size) { n += size; }
};

// Gathers small writes; a large string goes to `write` as it is, after what was gathered.
class Pieces {
 public:
  explicit Pieces(const std::function<void(std::string_view)>& write) : write_(write) {}
  void push_back(char c) { buffer_.push_back(c); }
  void append(const char* data, std::size_t size) {
    if (size < kDirectBytes) {
      buffer_.append(data, size);
      if (buffer_.size() >= kDirectBytes) Flush();
      return;
    }
    Flush();
    write_(std::string_view(data, size));
  }
  void Flush() {
    if (buffer_.empty()) return;
    write_(buffer_);
    buffer_.clear();
  }

 private:
  static constexpr std::size_t kDirectBytes = std::size_t{64} << 10;
  const std::function<void(std::string_view)>& write_;
  std::string buffer_;
};

// Reads a body; every read checks bounds, and the first failure sticks.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == in_.size(); }
  std::size_t pos() const { return pos_; }

  unsigned Byte() {
    if (!ok_ || pos_ >= in_.size()) return Fail();
    return static_cast<unsigned char>(in_[pos_++]);
  }

  std::uint64_t Varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (!ok_ || pos_ >= in_.size()) return Fail();
      const auto b = static_cast<unsigned char>(in_[pos_++]);
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return Fail();
  }

  void String(std::string& out) {
    const std::uint64_t n = Varint();
    if (!ok_ || n > in_.size() - pos_) {
      Fail();
      return;
    }
    out.assign(in_.data() + pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
  }

  // A count of items that each take at least one byte: bounded by what is left.
  std::size_t Count() {
    const std::uint64_t n = Varint();
    if (!ok_ || n > in_.size() - pos_) return Fail();
    return static_cast<std::size_t>(n);
  }

  unsigned Enum(unsigned max) {
    const unsigned v = Byte();
    if (v > max) return Fail();
    return v;
  }

 private:
  unsigned Fail() {
    ok_ = false;
    return 0;
  }
  std::string_view in_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

void ReadText(Reader& r, Text& t) {
  r.String(t.text);
  r.String(t.extra);
}

void ReadOpaque(Reader& r, Opaque& o) {
  r.String(o.kind);
  r.String(o.payload);
  o.link = static_cast<OpaqueLink>(r.Enum(static_cast<unsigned>(OpaqueLink::kResult)));
  r.String(o.link_id);
}

constexpr unsigned kMaxForm = static_cast<unsigned>(ContentForm::kAbsent);

}  // namespace

void EncodeBody(const Message& m, std::string& out) { Put(out, m); }

std::size_t EncodedBodySize(const Message& m) {
  Counter counter;
  Put(counter, m);
  return counter.n;
}

void EncodeBodyPieces(const Message& m, const std::function<void(std::string_view)>& write) {
  Pieces pieces(write);
  Put(pieces, m);
  pieces.Flush();
}

Result<Message> DecodeBody(std::string_view body) {
  Reader r(body);
  Message m;
  const unsigned format = r.Byte();
  if (r.ok() && format != kFormat && format != kFormatWithFlags) {
    return Status::Corruption("a stored message has body format " + std::to_string(format) +
                              ", which this recap does not know (it reads formats " +
                              std::to_string(kFormat) + " and " + std::to_string(kFormatWithFlags) +
                              "); it was written by a newer recap");
  }
  r.String(m.id);
  m.role = static_cast<Role>(r.Enum(static_cast<unsigned>(Role::kTool)));
  m.summary = r.Enum(1) == 1;
  m.form = static_cast<ContentForm>(r.Enum(kMaxForm));
  if (format == kFormatWithFlags) {
    const std::uint64_t flags = r.Varint();
    if (r.ok() && (flags & ~kKnownFlags) != 0) {
      return Status::Corruption("a stored message has flags " + std::to_string(flags) +
                                ", which this recap does not know; it was written by a newer "
                                "recap");
    }
    m.pinned = (flags & kFlagPinned) != 0;
    m.origin = static_cast<Origin>((flags & kOriginMask) >> kOriginShift);
  }
  r.String(m.extra);
  const std::size_t nparts = r.Count();
  m.parts.reserve(nparts);
  for (std::size_t i = 0; i < nparts && r.ok(); ++i) {
    switch (r.Byte()) {
      case kTagText: {
        Text t;
        ReadText(r, t);
        m.parts.emplace_back(std::move(t));
        break;
      }
      case kTagCall: {
        ToolCall c;
        r.String(c.id);
        r.String(c.name);
        r.String(c.arguments);
        r.String(c.extra);
        m.parts.emplace_back(std::move(c));
        break;
      }
      case kTagResult: {
        ToolResult res;
        r.String(res.call_id);
        res.is_error = r.Enum(1) == 1;
        res.form = static_cast<ContentForm>(r.Enum(kMaxForm));
        r.String(res.extra);
        const std::size_t nitems = r.Count();
        res.content.reserve(nitems);
        for (std::size_t k = 0; k < nitems && r.ok(); ++k) {
          const unsigned tag = r.Byte();
          if (tag == kTagText) {
            Text t;
            ReadText(r, t);
            res.content.emplace_back(std::move(t));
          } else if (tag == kTagOpaque) {
            Opaque o;
            ReadOpaque(r, o);
            res.content.emplace_back(std::move(o));
          } else if (r.ok()) {
            return Status::Corruption("a stored tool result has an item of unknown type " +
                                      std::to_string(tag));
          }
        }
        m.parts.emplace_back(std::move(res));
        break;
      }
      case kTagOpaque: {
        Opaque o;
        ReadOpaque(r, o);
        m.parts.emplace_back(std::move(o));
        break;
      }
      default:
        if (r.ok()) return Status::Corruption("a stored message has a part of unknown type");
    }
  }
  if (!r.ok()) {
    return Status::Corruption("a stored message is truncated or malformed (" +
                              std::to_string(body.size()) + " bytes)");
  }
  if (!r.at_end()) {
    return Status::Corruption("a stored message has " + std::to_string(body.size() - r.pos()) +
                              " unexpected bytes after its end");
  }
  return m;
}

}  // namespace internal
}  // namespace v0
}  // namespace recap
