#pragma once
// The one writer for the JSON Troupe writes: checkpoint manifests and
// safetensors headers, data.json and the data summary, the node's final
// and traffic lines. Compact (no spaces), in the order the caller writes.
// Strings are escaped the same way everywhere: quotes and backslashes,
// \n \r \t as such, any other control character as \u00XX; bytes from 0x80
// on pass unchanged (UTF-8). Numbers come out as the caller's printf format
// writes them, a non-finite one too (nan, inf): a caller that may hold one
// decides what to write instead.
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace troupe {

/// Appends `text` as a JSON string, quotes included.
void append_json_string(std::string& out, std::string_view text);

/// `text` as a JSON string, quotes included.
std::string json_string(std::string_view text);

/// Builds one JSON value, adding the commas between members and elements:
///   json_writer w;
///   w.begin_object().key("step").integer(12).key("loss").number(0.5, "%.4f").end_object();
class json_writer {
public:
  json_writer& begin_object() { return open('{'); }
  json_writer& end_object() { return close('}'); }
  json_writer& begin_array() { return open('['); }
  json_writer& end_array() { return close(']'); }
  /// A member's name; its value follows.
  json_writer& key(std::string_view name);

  json_writer& string(std::string_view text);
  json_writer& boolean(bool value);
  json_writer& null();
  /// printf_format: one conversion of a double ("%.4f", "%.9g", "%.17g").
  json_writer& number(double value, const char* printf_format);
  template <
    class Integer,
    std::enable_if_t<std::is_integral_v<Integer> && !std::is_same_v<Integer, bool>, int> = 0>
  json_writer& integer(Integer value) {
    return raw(std::to_string(value));
  }
  /// A value that is JSON already (one another writer made).
  json_writer& raw(std::string_view json);

  const std::string& text() const noexcept { return out_; }

private:
  json_writer& open(char bracket);
  json_writer& close(char bracket);
  void before_value();

  std::string out_;
  std::vector<bool> empty_; // per open object or array: nothing in it yet
  bool after_key_ = false;
};

} // namespace troupe
