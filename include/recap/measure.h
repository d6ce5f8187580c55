/// @file
/// recap — size accounting (SPEC §1).
///
/// Sizes are counted in characters = Unicode code points of every text a message contributes:
/// texts, tool names, tool-call arguments, tool-result contents, and the serialized length of
/// opaque payloads. Ids, roles and `extra` fields are not counted. Estimated tokens are
/// ceil(characters / 4).
///
/// Counting never fails: a byte that is not part of a valid UTF-8 sequence counts as one
/// character, exactly what replacing it with U+FFFD (as Transcript::Append does) yields.
///
/// All functions are pure and thread-safe.
#ifndef RECAP_MEASURE_H_
#define RECAP_MEASURE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "recap/export.h"
#include "recap/message.h"

namespace recap {
inline namespace v0 {

/// Code points in `text`; each invalid byte counts as one.
RECAP_EXPORT std::size_t CountCodePoints(std::string_view text) noexcept;

/// True when `text` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
RECAP_EXPORT bool IsValidUtf8(std::string_view text) noexcept;

/// `text` with every byte that is not part of a valid sequence replaced by U+FFFD.
/// Returns `text` unchanged when it is valid.
RECAP_EXPORT std::string ToValidUtf8(std::string_view text);

/// The number of bytes of the longest prefix of `text` holding at most `max_code_points`
/// code points and not ending inside a UTF-8 sequence.
RECAP_EXPORT std::size_t PrefixBytesForCodePoints(std::string_view text,
                                                  std::size_t max_code_points) noexcept;

/// What ScanCodePoints read.
struct Utf8Scan {
  std::size_t end = 0;          ///< the byte offset where it stopped
  std::size_t code_points = 0;  ///< code points read
  bool valid = true;            ///< every byte read belongs to a well-formed sequence
};

/// Reads `text` from byte `begin` (the start of a code point: 0, or an `end` of an earlier scan
/// of the same text) until `max_code_points` code points are read or the text ends, counting
/// as CountCodePoints does. With begin == 0: end == PrefixBytesForCodePoints(text, max),
/// code_points == min(CountCodePoints(text), max), valid == IsValidUtf8(text.substr(0, end)).
/// One pass, and the fast one: blocks of valid multi-byte UTF-8 are taken 16 bytes at a time.
RECAP_EXPORT Utf8Scan ScanCodePoints(std::string_view text, std::size_t begin,
                                     std::size_t max_code_points) noexcept;

/// Characters the message contributes (see above).
RECAP_EXPORT std::size_t MessageChars(const Message& m) noexcept;

/// ceil(chars / 4).
constexpr std::size_t EstimateTokens(std::size_t chars) noexcept { return (chars + 3) / 4; }

}  // namespace v0
}  // namespace recap

#endif  // RECAP_MEASURE_H_
