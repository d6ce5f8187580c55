#include "reduce/clip_arguments.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/measure.h"
#include "recap/tail_reducer.h"

#include "json/json_util.h"
#include "model/utf8.h"
#include "recap_internal/json_depth.h"

namespace recap {
inline namespace v0 {
namespace reduce_detail {
namespace {

using jsonutil::Json;

ClippedArgs Unchanged(std::string_view arguments) {
  return {std::string(arguments), CountCodePoints(arguments), true};
}

// ClipText(text, cap) for a text over `cap`, with its size and validity.
ClippedArgs ClipOverText(std::string_view text, std::size_t cap) {
  const Utf8Scan s = ScanCodePoints(text, 0, KeptChars(cap));
  ClippedArgs out;
  out.text.reserve(s.end + kTruncationMarker.size());
  AppendClipped(out.text, text, cap, s.end);
  out.chars = cap;
  out.valid = s.valid;
  return out;
}

// The bisection of the contract over the limits [lo, hi] given the rendered size at a limit
// (non-decreasing in the limit). Returns the chosen limit and its size, or the limit lo with a
// size over `cap` when even that does not fit.
template <class Size>
std::pair<std::size_t, std::size_t> Bisect(std::size_t lo, std::size_t hi, std::size_t cap,
                                           Size size) {
  std::size_t best = size(lo);
  if (best > cap) return {lo, best};  // as small as the structure allows
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo + 1) / 2;
    const std::size_t candidate = size(mid);
    if (candidate <= cap) {
      lo = mid;
      best = candidate;
    } else {
      hi = mid - 1;
    }
  }
  return {lo, best};
}

ClippedArgs ClipScanned(const ArgScanner& scan, std::string_view arguments, std::size_t cap) {
  const std::size_t longest = scan.Longest();
  // Every string is already as short as clipping makes it: leave the text alone, so that
  // clipping stays idempotent even when the JSON structure alone is over the cap.
  if (longest <= kMarkerChars + 1) return Unchanged(arguments);
  const auto [limit, chars] = Bisect(kMarkerChars + 1, longest - 1, cap,
                                     [&](std::size_t l) { return scan.RenderedChars(l); });
  return {scan.Render(limit), chars, true};
}

void CollectStrings(Json& j, std::vector<std::string*>& out) {
  if (j.is_string()) {
    out.push_back(j.get_ptr<std::string*>());
  } else if (j.is_object() || j.is_array()) {
    for (auto& v : j) CollectStrings(v, out);  // values only; keys are structure
  }
}

std::string Dump(const Json& doc) {
  return doc.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

// The DOM path: what ArgScanner does not vouch for. Parsed with nlohmann and rendered once
// with dump at the limit the bisection finds on numbers.
ClippedArgs ClipParsed(std::string_view arguments, std::size_t cap) {
  // CollectStrings and dump recurse once per level: arguments nested deeper than the codecs'
  // limit are not parsed at all but clipped like any text that is not JSON (R13.1).
  if (internal::FindTooDeep(arguments) != std::string_view::npos) {
    return ClipOverText(arguments, cap);
  }
  Json doc = Json::parse(arguments.begin(), arguments.end(), nullptr,
                         /*allow_exceptions=*/false);
  if (doc.is_discarded()) return ClipOverText(arguments, cap);  // not JSON: plain text rules

  std::vector<std::string*> strings;
  CollectStrings(doc, strings);
  struct Info {
    std::size_t chars = 0;
    std::size_t rendered = 0;
    std::size_t special_begin = 0;
    std::size_t special_end = 0;
  };
  std::vector<Info> info(strings.size());
  std::vector<Special> specials;
  std::size_t longest = 0;
  bool all_valid = true;
  for (std::size_t k = 0; k < strings.size(); ++k) {
    const std::string& s = *strings[k];
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    Info& in = info[k];
    in.special_begin = specials.size();
    std::size_t extra = 0;
    for (std::size_t i = 0; i < s.size(); ++in.chars) {
      const int len = utf8::SequenceLength(p + i, s.size() - i);
      if (len == 0) {
        all_valid = false;
        break;
      }
      if (len == 1) {
        const std::size_t e = EscapeExtra(p[i]);
        if (e > 0) {
          extra += e;
          specials.push_back({in.chars, extra});
        }
      }
      i += static_cast<std::size_t>(len);
    }
    in.special_end = specials.size();
    in.rendered = in.chars + extra;
    longest = std::max(longest, in.chars);
  }
  if (!all_valid) {
    // nlohmann's parser only yields well-formed strings; should one not be, render at every
    // step as the contract says rather than predict what dump's replacement would write.
    longest = 0;
    for (auto* s : strings) longest = std::max(longest, CountCodePoints(*s));
    if (longest <= kMarkerChars + 1) return Unchanged(arguments);
    std::vector<std::string> originals;
    originals.reserve(strings.size());
    for (auto* s : strings) originals.push_back(*s);
    std::string best;
    auto render = [&](std::size_t limit) {
      for (std::size_t k = 0; k < strings.size(); ++k) {
        *strings[k] =
            CountCodePoints(originals[k]) > limit ? ClipText(originals[k], limit) : originals[k];
      }
      best = Dump(doc);
      return CountCodePoints(best);
    };
    const auto [limit, chars] = Bisect(kMarkerChars + 1, longest - 1, cap, render);
    render(limit);
    const bool valid = IsValidUtf8(best);  // before `best` is moved into the result
    return {std::move(best), chars, valid};
  }
  if (longest <= kMarkerChars + 1) return Unchanged(arguments);

  // Everything but the string values' contents: the document with every string emptied.
  std::vector<std::string> originals;
  originals.reserve(strings.size());
  for (auto* s : strings) {
    originals.push_back(std::move(*s));
    s->clear();
  }
  const std::size_t structure = CountCodePoints(Dump(doc));
  const auto [limit, chars] = Bisect(kMarkerChars + 1, longest - 1, cap, [&](std::size_t l) {
    std::size_t total = structure;
    for (const Info& in : info) {
      total += in.chars > l ? PrefixRendered(specials.data() + in.special_begin,
                                             specials.data() + in.special_end, l - kMarkerChars) +
                                  kMarkerChars
                            : in.rendered;
    }
    return total;
  });
  for (std::size_t k = 0; k < strings.size(); ++k) {
    *strings[k] = info[k].chars > limit ? ClipText(originals[k], limit) : std::move(originals[k]);
  }
  return {Dump(doc), chars, true};
}

}  // namespace

// ClipArguments for arguments known to be over `cap`, with the result's size.
ClippedArgs ClipOverArguments(std::string_view arguments, std::size_t cap, ArgScanner& scan,
                              bool well_formed) {
  if (scan.Run(arguments, well_formed)) return ClipScanned(scan, arguments, cap);
  return ClipParsed(arguments, cap);
}

}  // namespace reduce_detail

using reduce_detail::ArgScanner;
using reduce_detail::ClipOverArguments;
using reduce_detail::kMarkerChars;
using reduce_detail::PrefixBytes;

std::string ClipText(std::string_view text, std::size_t cap) {
  if (CountCodePoints(text) <= cap) return std::string(text);
  if (cap <= kMarkerChars) {
    return std::string(
        kTruncationMarker.substr(0, PrefixBytesForCodePoints(kTruncationMarker, cap)));
  }
  const std::size_t keep = PrefixBytesForCodePoints(text, cap - kMarkerChars);
  std::string out;
  out.reserve(keep + kTruncationMarker.size());
  out.append(text.data(), keep);
  out.append(kTruncationMarker);
  return out;
}

std::string ClipArguments(std::string_view arguments, std::size_t cap) {
  // Within the cap (a prefix of `cap` code points is the whole text): unchanged.
  if (arguments.size() <= cap || PrefixBytes(arguments, cap) == arguments.size()) {
    return std::string(arguments);
  }
  ArgScanner scanner;
  return ClipOverArguments(arguments, cap, scanner, false).text;
}

}  // namespace v0
}  // namespace recap
