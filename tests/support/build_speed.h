// How much work a generated-transcript property can afford in this build. Under
// AddressSanitizer, or without optimization, every case costs three to five times as much as in
// the Release build; the sanitizer builds exist to catch memory errors, which fewer cases still
// reach, while the Release build runs the full counts. Tests scale their case counts with this.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define RECAP_TEST_SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RECAP_TEST_SLOW_BUILD 1
#endif
#endif
#if !defined(RECAP_TEST_SLOW_BUILD) && !defined(NDEBUG)
#define RECAP_TEST_SLOW_BUILD 1
#endif

namespace recap_test {

#ifdef RECAP_TEST_SLOW_BUILD
inline constexpr bool kSlowBuild = true;
#else
inline constexpr bool kSlowBuild = false;
#endif

}  // namespace recap_test
