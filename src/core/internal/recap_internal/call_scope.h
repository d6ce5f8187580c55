// Which Compactors' calls the running thread is inside. recap runs a host's callbacks (the
// summarizer, event sinks, plugin hooks) inside a Compactor's call, which holds the session;
// a callback that called the same Compactor again would wait for that session forever, so the
// Compactor refuses such a call (compactor.cc). A plugin hook runs on a thread of its own:
// the thread that starts it passes its scopes on (Current, then Adopted on the new thread).
#ifndef RECAP_SRC_CORE_INTERNAL_RECAP_INTERNAL_CALL_SCOPE_H_
#define RECAP_SRC_CORE_INTERNAL_RECAP_INTERNAL_CALL_SCOPE_H_

#include <algorithm>
#include <cstddef>
#include <vector>

namespace recap {
inline namespace v0 {
namespace internal {

class CallScope {
 public:
  // Marks this thread inside a call of `owner` (a Compactor's state) while it lives.
  explicit CallScope(const void* owner) { Held().push_back(owner); }
  ~CallScope() { Held().pop_back(); }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

  // True on a thread inside a call of `owner`.
  static bool Inside(const void* owner) {
    const std::vector<const void*>& held = Held();
    return std::find(held.begin(), held.end(), owner) != held.end();
  }
  // The calls this thread is inside, for a thread it starts to adopt.
  static std::vector<const void*> Current() { return Held(); }

  // Marks this thread inside the calls `owners` while it lives (a thread that runs a callback
  // for the thread that started it).
  class Adopted {
   public:
    explicit Adopted(const std::vector<const void*>& owners) {
      Held().insert(Held().end(), owners.begin(), owners.end());
      count_ = owners.size();
    }
    ~Adopted() { Held().resize(Held().size() - count_); }
    Adopted(const Adopted&) = delete;
    Adopted& operator=(const Adopted&) = delete;

   private:
    std::size_t count_ = 0;
  };

 private:
  static std::vector<const void*>& Held() {
    thread_local std::vector<const void*> held;
    return held;
  }
};

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_INTERNAL_RECAP_INTERNAL_CALL_SCOPE_H_
