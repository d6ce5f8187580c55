#include "recap/measure.h"

#include "utf8.h"

namespace recap {
inline namespace v0 {

std::size_t CountCodePoints(std::string_view text) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  std::size_t count = 0;
  while (i < n) {
    // Most agent text is ASCII: take it eight bytes at a time.
    if (i + 8 <= n && utf8::EightAscii(p + i)) {
      i += 8;
      count += 8;
      continue;
    }
    const int len = utf8::SequenceLength(p + i, n - i);
    i += len > 0 ? static_cast<std::size_t>(len) : 1;  // an invalid byte counts as one
    ++count;
  }
  return count;
}

bool IsValidUtf8(std::string_view text) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    if (i + 8 <= n && utf8::EightAscii(p + i)) {
      i += 8;
      continue;
    }
    const int len = utf8::SequenceLength(p + i, n - i);
    if (len == 0) return false;
    i += static_cast<std::size_t>(len);
  }
  return true;
}

std::string ToValidUtf8(std::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::string out;
  out.reserve(n + n / 4);
  std::size_t i = 0;
  while (i < n) {
    const int len = utf8::SequenceLength(p + i, n - i);
    if (len == 0) {
      out.append(kReplacement, 3);
      ++i;
    } else {
      out.append(text.data() + i, static_cast<std::size_t>(len));
      i += static_cast<std::size_t>(len);
    }
  }
  return out;
}

std::size_t PrefixBytesForCodePoints(std::string_view text,
                                     std::size_t max_code_points) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  std::size_t count = 0;
  while (i < n && count < max_code_points) {
    if (i + 8 <= n && count + 8 <= max_code_points && utf8::EightAscii(p + i)) {
      i += 8;
      count += 8;
      continue;
    }
    const int len = utf8::SequenceLength(p + i, n - i);
    i += len > 0 ? static_cast<std::size_t>(len) : 1;
    ++count;
  }
  return i;
}

namespace {
std::size_t ResultItemChars(const ResultItem& item) noexcept {
  if (const auto* t = std::get_if<Text>(&item)) return CountCodePoints(t->text);
  return CountCodePoints(std::get<Opaque>(item).payload);
}
}  // namespace

std::size_t MessageChars(const Message& m) noexcept {
  std::size_t total = 0;
  for (const auto& part : m.parts) {
    if (const auto* t = std::get_if<Text>(&part)) {
      total += CountCodePoints(t->text);
    } else if (const auto* c = std::get_if<ToolCall>(&part)) {
      total += CountCodePoints(c->name) + CountCodePoints(c->arguments);
    } else if (const auto* r = std::get_if<ToolResult>(&part)) {
      for (const auto& item : r->content) total += ResultItemChars(item);
    } else {
      total += CountCodePoints(std::get<Opaque>(part).payload);
    }
  }
  return total;
}

}  // namespace v0
}  // namespace recap
