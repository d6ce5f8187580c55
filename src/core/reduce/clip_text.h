// The reduce room's helpers for reading a text only as far as a cap needs, and for writing a
// text clipped to a cap (ClipText's form: a prefix, then kTruncationMarker). Shared by the
// arguments clipper (clip_arguments.cc) and the reducer (tail_reducer.cc).
#ifndef RECAP_SRC_CORE_REDUCE_CLIP_TEXT_H_
#define RECAP_SRC_CORE_REDUCE_CLIP_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "recap/measure.h"
#include "recap/tail_reducer.h"

#include "model/utf8.h"

namespace recap {
inline namespace v0 {
namespace reduce_detail {

// CountCodePoints(kTruncationMarker), which tests/reduce/test_tail_reducer.cc checks.
inline constexpr std::size_t kMarkerChars = 31;

// ---- Reading texts only as far as needed --------------------------------------------------
//
// The reducer never counts a whole text when it only needs to know whether the text is over a
// cap and where to cut it: it reads at most cap + 1 code points, with ScanCodePoints, whose
// figures are those of CountCodePoints and PrefixBytesForCodePoints.

inline void Prefetch(const void* p) noexcept {
#if defined(__GNUC__)
  __builtin_prefetch(p);
#else
  (void)p;
#endif
}

// Bytes of the longest prefix of `text` holding at most `k` code points
// (PrefixBytesForCodePoints).
inline std::size_t PrefixBytes(std::string_view text, std::size_t k) noexcept {
  return k >= text.size() ? text.size() : ScanCodePoints(text, 0, k).end;
}

// How many code points of a text clipped to `cap` come before the marker (ClipText).
constexpr std::size_t KeptChars(std::size_t cap) noexcept {
  return cap > kMarkerChars ? cap - kMarkerChars : 0;
}

// Appends ClipText(text, cap) for a text over `cap`, whose first KeptChars(cap) code points
// take `keep` bytes.
inline void AppendClipped(std::string& out, std::string_view text, std::size_t cap,
                          std::size_t keep) {
  if (cap <= kMarkerChars) {
    out.append(kTruncationMarker.substr(0, PrefixBytesForCodePoints(kTruncationMarker, cap)));
    return;
  }
  out.append(text.data(), keep);
  out.append(kTruncationMarker);
}

}  // namespace reduce_detail
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_REDUCE_CLIP_TEXT_H_
