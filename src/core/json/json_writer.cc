// recap's JSON writer (json_util.h's Dump, AppendDump, DumpValid and DumpAscii): one
// iterative Writer, strict, replacing or ASCII-only about UTF-8, that writes numbers kept as
// text as they were read.
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "json/json_escape.h"
#include "json/json_members.h"
#include "json/json_text.h"
#include "json/json_util.h"

namespace recap {
inline namespace v0 {
namespace jsonutil {

namespace {

// The code point of the valid sequence of `len` bytes at p.
std::uint32_t CodePoint(const unsigned char* p, std::size_t len) {
  switch (len) {
    case 1: return p[0];
    case 2: return (std::uint32_t{p[0] & 0x1Fu} << 6) | (p[1] & 0x3Fu);
    case 3: return (std::uint32_t{p[0] & 0x0Fu} << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    default:
      return (std::uint32_t{p[0] & 0x07u} << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) |
             (p[3] & 0x3Fu);
  }
}

// ---- The writer -----------------------------------------------------------------------------

enum class Utf8Mode : std::uint8_t {
  kStrict,   // invalid UTF-8 fails the write
  kReplace,  // invalid bytes become U+FFFD
  kAscii,    // every non-ASCII character as a \u escape; invalid bytes as \ufffd
};

class Writer {
 public:
  Writer(std::string* out, Utf8Mode mode) : out_(out), mode_(mode) {}

  // False on invalid UTF-8 (strict) or too deep; problem() says which.
  bool Write(const Json& root, int depth);
  const std::string& problem() const { return problem_; }
  bool too_deep() const { return too_deep_; }

 private:
  struct Frame {
    const Json* container;
    std::size_t next;
    bool object;
  };

  bool Scalar(const Json& v);
  bool String(std::string_view s);
  void AppendEscape(std::uint32_t unit) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(unit));
    out_->append(buf, 6);
  }

  std::string* out_;
  Utf8Mode mode_;
  std::string problem_;
  bool too_deep_ = false;
};

bool Writer::String(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  out_->push_back('"');
  std::size_t run = 0;  // start of the bytes not yet appended
  std::size_t i = 0;
  while (i < n) {
    while (i + 8 <= n && jsonutil::EightPlain<true>(p + i)) i += 8;
    if (i >= n) break;
    const unsigned char c = p[i];
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x7F) {
      ++i;
      continue;
    }
    if (c == 0x7F) {
      if (mode_ == Utf8Mode::kAscii) {
        out_->append(s.data() + run, i - run);
        AppendEscape(c);
        run = ++i;
      } else {
        ++i;
      }
      continue;
    }
    if (c >= 0x80) {
      const std::size_t len = ValidSequence(s, i);
      if (len == 0) {
        if (mode_ == Utf8Mode::kStrict) {
          problem_ = "invalid UTF-8 byte at index " + std::to_string(i) + ": " + Hex2(c);
          return false;
        }
        out_->append(s.data() + run, i - run);
        if (mode_ == Utf8Mode::kAscii) {
          out_->append("\\ufffd");
        } else {
          out_->append("\xEF\xBF\xBD");
        }
        run = ++i;
        continue;
      }
      if (mode_ == Utf8Mode::kAscii) {
        out_->append(s.data() + run, i - run);
        const std::uint32_t cp = CodePoint(p + i, len);
        if (cp >= 0x10000) {
          AppendEscape(0xD800 + ((cp - 0x10000) >> 10));
          AppendEscape(0xDC00 + ((cp - 0x10000) & 0x3FF));
        } else {
          AppendEscape(cp);
        }
        i += len;
        run = i;
      } else {
        i += len;
      }
      continue;
    }
    // '"', '\\' or a control character: escaped as nlohmann's dump() escapes them.
    out_->append(s.data() + run, i - run);
    switch (c) {
      case '"': out_->append("\\\""); break;
      case '\\': out_->append("\\\\"); break;
      case '\b': out_->append("\\b"); break;
      case '\f': out_->append("\\f"); break;
      case '\n': out_->append("\\n"); break;
      case '\r': out_->append("\\r"); break;
      case '\t': out_->append("\\t"); break;
      default: AppendEscape(c); break;
    }
    run = ++i;
  }
  out_->append(s.data() + run, n - run);
  out_->push_back('"');
  return true;
}

bool Writer::Scalar(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: out_->append("null"); return true;
    case Json::value_t::boolean: out_->append(v.get<bool>() ? "true" : "false"); return true;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: {
      char buf[24];
      const auto r = v.is_number_unsigned()
                         ? std::to_chars(buf, buf + sizeof buf, v.get<std::uint64_t>())
                         : std::to_chars(buf, buf + sizeof buf, v.get<std::int64_t>());
      out_->append(buf, r.ptr);
      return true;
    }
    case Json::value_t::number_float:
      // nlohmann's shortest round-trip form ("0.85", "1e+30", "16000.0"); a scalar's dump()
      // does not recurse.
      out_->append(v.dump());
      return true;
    case Json::value_t::string: return String(v.get_ref<const std::string&>());
    case Json::value_t::binary:
      if (IsNumberText(v)) {
        out_->append(NumberText(v));
        return true;
      }
      problem_ = "binary data, which JSON cannot hold";
      return false;
    case Json::value_t::discarded:
    case Json::value_t::object:
    case Json::value_t::array: break;
  }
  problem_ = "a value JSON cannot hold";
  return false;
}

bool Writer::Write(const Json& root, int depth) {
  std::vector<Frame> stack;
  const Json* next = &root;
  while (true) {
    if (next != nullptr) {
      const Json& v = *next;
      next = nullptr;
      if (v.is_object() || v.is_array()) {
        const bool object = v.is_object();
        const bool empty = object ? v.get_ref<const Json::object_t&>().empty()
                                  : v.get_ref<const Json::array_t&>().empty();
        if (depth + static_cast<int>(stack.size()) + 1 > internal::kMaxJsonDepth) {
          too_deep_ = true;
          problem_ = "nested deeper than " + std::to_string(internal::kMaxJsonDepth) + " levels";
          return false;
        }
        if (empty) {
          out_->append(object ? "{}" : "[]");
        } else {
          out_->push_back(object ? '{' : '[');
          stack.push_back({&v, 0, object});
        }
      } else if (!Scalar(v)) {
        return false;
      }
    }
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.object) {
        const Members& members = MembersOf(*f.container);
        if (f.next < members.size()) {
          if (f.next > 0) out_->push_back(',');
          const auto& member = members[f.next++];
          if (!String(member.first)) return false;
          out_->push_back(':');
          next = &member.second;
          break;
        }
        out_->push_back('}');
      } else {
        const Json::array_t& elements = f.container->get_ref<const Json::array_t&>();
        if (f.next < elements.size()) {
          if (f.next > 0) out_->push_back(',');
          next = &elements[f.next++];
          break;
        }
        out_->push_back(']');
      }
      stack.pop_back();
    }
    if (next == nullptr) return true;
  }
}

}  // namespace

// ---- Writing --------------------------------------------------------------------------------

Status Dump(const Json& value, std::string_view what, std::string* out, int depth) {
  out->clear();
  return AppendDump(value, what, out, depth);
}

Status AppendDump(const Json& value, std::string_view what, std::string* out, int depth) {
  const std::size_t old_size = out->size();
  Writer writer(out, Utf8Mode::kStrict);
  if (writer.Write(value, depth)) return Status::OK();
  out->resize(old_size);
  if (writer.too_deep()) {
    return Status::InvalidArgument(
        std::string(what) + " would be nested deeper than " +
        std::to_string(internal::kMaxJsonDepth) +
        " levels once written; recap refuses to write a document it could not read back.");
  }
  if (writer.problem().rfind("invalid UTF-8", 0) == 0) {
    return Status::InvalidArgument(std::string(what) + " holds text that is not valid UTF-8 (" +
                                   writer.problem() +
                                   "); JSON must be UTF-8. Repair the text first, e.g. with "
                                   "recap::ToValidUtf8.");
  }
  return Status::InvalidArgument(std::string(what) + " holds " + writer.problem() + ".");
}

std::string DumpValid(const Json& value) {
  std::string text;
  Writer writer(&text, Utf8Mode::kReplace);
  writer.Write(value, 0);  // a tree recap read is within internal::kMaxJsonDepth
  return text;
}

std::string DumpAscii(const Json& value) {
  std::string text;
  Writer writer(&text, Utf8Mode::kAscii);
  writer.Write(value, 0);
  return text;
}

}  // namespace jsonutil
}  // namespace v0
}  // namespace recap
