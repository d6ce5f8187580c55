// A Status message built with its remedies recorded as data (recap::Remedy): the text in the
// C++ API's words, and for each remedy where it says it. The stores and the HTTP provider build
// their messages with it so that the recap command (and any interface other than C++) can say
// the remedies in its own words with Status::Rendered. Header-only.
//
//   RemedyText m("the database is locked; waited ");
//   m.Remedy("sqlite.busy_timeout_ms", "busy_timeout_ms (" + ms + " ms)", ms);
//   return m.ToStatus(StatusCode::kUnavailable);
#ifndef RECAP_SRC_CORE_RECAP_INTERNAL_REMEDY_TEXT_H_
#define RECAP_SRC_CORE_RECAP_INTERNAL_REMEDY_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recap/status.h"

namespace recap {
inline namespace v0 {
namespace internal {

class RemedyText {
 public:
  RemedyText() = default;
  explicit RemedyText(std::string_view text) : text_(text) {}
  // The message of `status` with the remedies it records, to be continued.
  explicit RemedyText(const recap::Status& status)
      : text_(status.message()), remedies_(status.remedies()) {}

  // Plain text.
  RemedyText& operator<<(std::string_view text) {
    text_ += text;
    return *this;
  }
  // Another RemedyText, its remedies with it.
  RemedyText& operator<<(const RemedyText& more) {
    for (const recap::Remedy& r : more.remedies_) {
      remedies_.push_back(recap::Remedy{r.id, r.value, text_.size() + r.offset, r.size});
    }
    text_ += more.text_;
    return *this;
  }
  // `words` names remedy `id` (carrying `value`, when it has a figure).
  RemedyText& Remedy(std::string id, std::string_view words, std::string value = {}) {
    remedies_.push_back(recap::Remedy{std::move(id), std::move(value), text_.size(), words.size()});
    text_ += words;
    return *this;
  }
  // The option `option` (e.g. "HttpProviderOptions.timeout_ms") named as `words` (its full
  // name by default).
  RemedyText& Option(const std::string& option, std::string_view words = {}) {
    return Remedy(option, words.empty() ? std::string_view(option) : words);
  }

  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }
  // Its first letter in upper case (a sentence's start; never inside a remedy).
  RemedyText& UpperFirst() {
    if (!text_.empty() && text_[0] >= 'a' && text_[0] <= 'z')
      text_[0] = static_cast<char>(text_[0] - 'a' + 'A');
    return *this;
  }

  recap::Status ToStatus(StatusCode code) const {
    recap::Status s(code, text_);
    for (const recap::Remedy& r : remedies_) s = s.WithRemedy(r);
    return s;
  }

 private:
  std::string text_;
  std::vector<recap::Remedy> remedies_;
};

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_RECAP_INTERNAL_REMEDY_TEXT_H_
