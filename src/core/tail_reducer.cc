#include "recap/tail_reducer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "log_internal.h"
#include "recap/measure.h"

namespace recap {
inline namespace v0 {

namespace {

const std::size_t kMarkerChars = CountCodePoints(kTruncationMarker);

using OrderedJson = nlohmann::ordered_json;

void CollectStrings(OrderedJson& j, std::vector<std::string*>& out) {
  if (j.is_string()) {
    out.push_back(j.get_ptr<std::string*>());
  } else if (j.is_object() || j.is_array()) {
    for (auto& v : j) CollectStrings(v, out);  // values only; keys are structure
  }
}

// Per-message figures the reducer keeps while it works, so that no byte is measured twice.
struct Sizes {
  std::size_t chars = 0;
  std::size_t max_content = 0;  // largest text part or tool-call argument text
  std::size_t max_result = 0;   // largest text item inside a tool result
};

Sizes Measure(const Message& m, std::size_t chars) {
  Sizes s;
  s.chars = chars;
  for (const auto& part : m.parts) {
    if (const auto* t = std::get_if<Text>(&part)) {
      s.max_content = std::max(s.max_content, CountCodePoints(t->text));
    } else if (const auto* c = std::get_if<ToolCall>(&part)) {
      s.max_content = std::max(s.max_content, CountCodePoints(c->arguments));
    } else if (const auto* r = std::get_if<ToolResult>(&part)) {
      for (const auto& item : r->content) {
        if (const auto* it = std::get_if<Text>(&item)) {
          s.max_result = std::max(s.max_result, CountCodePoints(it->text));
        }
      }
    }
  }
  return s;
}

// Clips every part of `m` that is over its cap. Opaque items are never touched.
void ClipMessage(Message& m, std::size_t content_cap, std::size_t result_cap) {
  for (auto& part : m.parts) {
    if (auto* t = std::get_if<Text>(&part)) {
      if (CountCodePoints(t->text) > content_cap) t->text = ClipText(t->text, content_cap);
    } else if (auto* c = std::get_if<ToolCall>(&part)) {
      if (CountCodePoints(c->arguments) > content_cap) {
        c->arguments = ClipArguments(c->arguments, content_cap);
      }
    } else if (auto* r = std::get_if<ToolResult>(&part)) {
      for (auto& item : r->content) {
        if (auto* it = std::get_if<Text>(&item)) {
          if (CountCodePoints(it->text) > result_cap) it->text = ClipText(it->text, result_cap);
        }
      }
    }
  }
}

}  // namespace

std::size_t ReductionTarget(std::size_t max_context_chars,
                            std::size_t instruction_chars) noexcept {
  const std::size_t room =
      max_context_chars > instruction_chars ? max_context_chars - instruction_chars : 0;
  return std::max(kMinReductionTarget, room);
}

std::string ClipText(std::string_view text, std::size_t cap) {
  if (CountCodePoints(text) <= cap) return std::string(text);
  if (cap <= kMarkerChars) {
    return std::string(kTruncationMarker.substr(0, PrefixBytesForCodePoints(kTruncationMarker, cap)));
  }
  const std::size_t keep = PrefixBytesForCodePoints(text, cap - kMarkerChars);
  std::string out;
  out.reserve(keep + kTruncationMarker.size());
  out.append(text.data(), keep);
  out.append(kTruncationMarker);
  return out;
}

std::string ClipArguments(std::string_view arguments, std::size_t cap) {
  if (CountCodePoints(arguments) <= cap) return std::string(arguments);
  OrderedJson doc = OrderedJson::parse(arguments.begin(), arguments.end(), nullptr,
                                       /*allow_exceptions=*/false);
  if (doc.is_discarded()) return ClipText(arguments, cap);  // not JSON: plain text rules

  std::vector<std::string*> strings;
  CollectStrings(doc, strings);
  std::vector<std::string> originals;
  std::size_t longest = 0;
  originals.reserve(strings.size());
  for (auto* s : strings) {
    originals.push_back(*s);
    longest = std::max(longest, CountCodePoints(*s));
  }
  if (longest <= kMarkerChars) return std::string(arguments);  // nothing can get shorter

  // Every string longer than `limit` is clipped to `limit`. The serialized size only grows
  // with `limit`, so the largest limit that fits is found by bisection.
  auto render = [&](std::size_t limit) {
    for (std::size_t k = 0; k < strings.size(); ++k) {
      *strings[k] = CountCodePoints(originals[k]) > limit ? ClipText(originals[k], limit)
                                                          : originals[k];
    }
    return doc.dump(-1, ' ', /*ensure_ascii=*/false, OrderedJson::error_handler_t::replace);
  };
  std::size_t lo = kMarkerChars + 1;  // the smallest limit that still keeps some content
  std::size_t hi = longest - 1;
  // Every string is already as short as clipping makes it: leave the text alone, so that
  // clipping stays idempotent even when the JSON structure alone is over the cap.
  if (lo > hi) return std::string(arguments);
  std::string best = render(lo);
  if (CountCodePoints(best) > cap) return best;  // as small as the structure allows
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo + 1) / 2;
    std::string candidate = render(mid);
    if (CountCodePoints(candidate) <= cap) {
      lo = mid;
      best = std::move(candidate);
    } else {
      hi = mid - 1;
    }
  }
  return best;
}

ReduceResult ReduceTail(const Transcript& t, std::size_t target_chars) {
  ReduceResult result;
  result.transcript = t;
  result.before_chars = t.chars();
  result.after_chars = result.before_chars;
  result.fits = result.before_chars <= target_chars;
  if (result.fits) return result;

  const std::size_t n = t.size();
  std::vector<Sizes> sizes(n);
  std::vector<std::uint8_t> measured(n, 0);
  // Clipped working copies, by position; committed to the transcript once at the end.
  std::vector<std::pair<std::size_t, Message>> edits;
  std::vector<std::size_t> edit_of(n, SIZE_MAX);
  std::size_t total = result.before_chars;

  for (std::size_t round = 0; round < kToolResultCaps.size() && total > target_chars; ++round) {
    const std::size_t result_cap = kToolResultCaps[round];
    const std::size_t content_cap = kContentCaps[round];
    const std::size_t smallest_cap = std::min(result_cap, content_cap);
    result.rounds = static_cast<int>(round) + 1;

    std::vector<std::size_t> over;
    for (std::size_t i = 0; i < n; ++i) {
      if (t[i].summary) continue;  // checkpoints are bounded by design (R4.4)
      const std::size_t chars = edit_of[i] != SIZE_MAX ? sizes[i].chars : t.chars(i);
      if (chars <= smallest_cap) continue;  // no part of it can be over a cap
      if (!measured[i]) {
        sizes[i] = Measure(t[i], chars);
        measured[i] = 1;
      }
      if (sizes[i].max_content > content_cap || sizes[i].max_result > result_cap) {
        over.push_back(i);
      }
    }
    // Largest first; ties keep the earlier position first.
    std::stable_sort(over.begin(), over.end(), [&](std::size_t a, std::size_t b) {
      return sizes[a].chars > sizes[b].chars;
    });

    for (std::size_t i : over) {
      if (total <= target_chars) break;
      Message m = edit_of[i] == SIZE_MAX ? t[i] : edits[edit_of[i]].second;
      ClipMessage(m, content_cap, result_cap);
      const std::size_t new_chars = MessageChars(m);
      // Arguments whose JSON structure alone is over the cap cannot shrink; such a message
      // is left as it is rather than reported as cut.
      if (new_chars >= sizes[i].chars) continue;
      total = total - sizes[i].chars + new_chars;
      sizes[i] = Measure(m, new_chars);
      if (edit_of[i] == SIZE_MAX) {
        edit_of[i] = edits.size();
        edits.emplace_back(i, std::move(m));
      } else {
        edits[edit_of[i]].second = std::move(m);
      }
      ++result.clips;
    }
  }

  for (const auto& e : edits) result.clipped.push_back(e.first);
  std::sort(result.clipped.begin(), result.clipped.end());
  result.transcript.Set(std::move(edits));
  result.after_chars = result.transcript.chars();
  result.fits = result.after_chars <= target_chars;
  RECAP_LOG_DEBUG("reduced {} messages in {} rounds: {} -> {} chars (target {}){}",
                  result.clipped.size(), result.rounds, result.before_chars, result.after_chars,
                  target_chars, result.fits ? "" : ", still over");
  return result;
}

}  // namespace v0
}  // namespace recap
