#pragma once
// Enums that settings are made of, with the names a config file uses for
// them. One table per enum (a specialisation of enum_names next to the enum)
// gives parsing, printing and the list of choices, so the three cannot drift.
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace troupe {

/// Specialised by TROUPE_ENUM_NAMES beside each enum.
template <class E>
struct enum_names;

/// The names of enum E: TROUPE_ENUM_NAMES(E, {E::a, "a"}, {E::b, "b"});
#define TROUPE_ENUM_NAMES(E, ...)                                                                  \
  template <>                                                                                      \
  struct enum_names<E> {                                                                           \
    static constexpr std::pair<E, const char*> table[] = {__VA_ARGS__};                            \
  }

/// The name of `value` ("?" for a value outside the table).
template <class E>
const char* name_of(E value) {
  for (auto& [e, name] : enum_names<E>::table)
    if (e == value)
      return name;
  return "?";
}

/// The value named `text`, or nullopt.
template <class E>
std::optional<E> enum_from_name(std::string_view text) {
  for (auto& [e, name] : enum_names<E>::table)
    if (text == name)
      return e;
  return std::nullopt;
}

/// "a, b, c": every name, for messages.
template <class E>
std::string name_list() {
  std::string out;
  for (auto& entry : enum_names<E>::table)
    out += (out.empty() ? "" : ", ") + std::string(entry.second);
  return out;
}

} // namespace troupe
