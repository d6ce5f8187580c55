// The value of a Result a test needs to succeed: REQUIREs it OK (the status shown when not)
// and moves the value out. One helper for every test file that reads results this way.
#ifndef RECAP_TESTS_SUPPORT_OK_H_
#define RECAP_TESTS_SUPPORT_OK_H_

#include <utility>

#include <catch2/catch.hpp>

#include "recap/status.h"

namespace recap {
namespace testing {

template <class T>
T Ok(Result<T> r) {
  INFO("status: " << r.status().ToString());
  REQUIRE(r.ok());
  return std::move(r).value();
}

}  // namespace testing
}  // namespace recap

#endif  // RECAP_TESTS_SUPPORT_OK_H_
