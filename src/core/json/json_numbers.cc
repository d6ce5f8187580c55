// Numbers kept as text (json_util.h): a number read with Numbers::kText, its text and its
// value; and ToDouble (json_text.h), a number's text as a double, which the reader uses too.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

#include "json/json_text.h"
#include "json/json_util.h"

namespace recap {
inline namespace v0 {
namespace jsonutil {

namespace {

// For a number out of a double's range: whether it is too large (else too small). The
// decimal exponent of its first significant digit, from the digits and the exponent.
bool Overflows(std::string_view text) {
  std::size_t i = text[0] == '-' ? 1 : 0;
  long long magnitude = 0;  // the number is about 10^magnitude
  bool significant = false;
  for (; i < text.size() && IsDigit(text[i]); ++i) {
    if (text[i] != '0') significant = true;
    if (significant) ++magnitude;
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && IsDigit(text[i]); ++i) {
      if (significant) break;
      if (text[i] != '0') {
        significant = true;
      } else {
        --magnitude;
      }
    }
    while (i < text.size() && IsDigit(text[i])) ++i;
  }
  long long exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const bool negative = i < text.size() && text[i] == '-';
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    for (; i < text.size() && IsDigit(text[i]); ++i) {
      exponent = std::min<long long>(exponent * 10 + (text[i] - '0'), 1LL << 40);
    }
    if (negative) exponent = -exponent;
  }
  return magnitude + exponent > 0;
}

}  // namespace

double ToDouble(std::string_view text, bool* ok) {
  double d = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), d);
  *ok = true;
  if (r.ec == std::errc::result_out_of_range) {
    if (Overflows(text)) {
      *ok = false;
      return text[0] == '-' ? -std::numeric_limits<double>::infinity()
                            : std::numeric_limits<double>::infinity();
    }
    return text[0] == '-' ? -0.0 : 0.0;
  }
  return d;
}

// ---- Numbers kept as text -------------------------------------------------------------------

bool IsNumberText(const Json& value) noexcept {
  return value.is_binary() && value.get_binary().has_subtype() &&
         value.get_binary().subtype() == kNumberTextSubtype;
}

std::string_view NumberText(const Json& value) {
  const auto& bytes = value.get_binary();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

Json MakeNumberText(std::string_view text) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(text.data());
  return Json::binary(std::vector<std::uint8_t>(p, p + text.size()), kNumberTextSubtype);
}

bool IsNumber(const Json& value) noexcept { return value.is_number() || IsNumberText(value); }

std::optional<double> NumberValue(const Json& value) {
  if (value.is_number()) return value.get<double>();
  if (!IsNumberText(value)) return std::nullopt;
  bool ok = true;
  return ToDouble(NumberText(value), &ok);
}

std::optional<std::int64_t> IntegerValue(const Json& value) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      return std::nullopt;
    }
    return value.get<std::int64_t>();
  }
  if (!IsNumberText(value)) return std::nullopt;
  const std::string_view text = NumberText(value);
  std::int64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace jsonutil
}  // namespace v0
}  // namespace recap
