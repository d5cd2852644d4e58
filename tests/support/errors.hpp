#pragma once
// What a test expects a call to throw: the message of an error of one type.
#include <string>

namespace troupe::testing {

/// The message of the E that f() throws, or "no error" when it returns;
/// any other exception escapes (and fails the test).
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "no error";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace troupe::testing
