#pragma once
// The JSON a checkpoint is made of (a safetensors header, the manifest):
// a small value type, a strict parser bounded in depth and size (its input
// is a file that may be truncated, corrupt or hostile) and a writer (over
// tensor/core's json_writer) whose output the parser reads back exactly.
// Integers up to 2^53 are exact.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tensor/core/error.hpp"

namespace troupe::json {

class value;
using array = std::vector<value>;
using object = std::map<std::string, value>;

class value {
public:
  value() = default; // null
  value(bool b) : data_(b) {}
  value(double d) : data_(d) {}
  value(int64_t i) : data_(static_cast<double>(i)) {}
  value(int i) : data_(static_cast<double>(i)) {}
  value(size_t i) : data_(static_cast<double>(i)) {}
  value(std::string s) : data_(std::move(s)) {}
  value(const char* s) : data_(std::string(s)) {}
  value(array a) : data_(std::move(a)) {}
  value(object o) : data_(std::move(o)) {}

  bool is_null() const { return std::holds_alternative<std::monostate>(data_); }
  const bool* as_bool() const { return std::get_if<bool>(&data_); }
  const double* as_number() const { return std::get_if<double>(&data_); }
  const std::string* as_string() const { return std::get_if<std::string>(&data_); }
  const array* as_array() const { return std::get_if<array>(&data_); }
  const object* as_object() const { return std::get_if<object>(&data_); }
  /// The number as an integer, if it is one exactly (within +-2^53).
  std::optional<int64_t> as_int() const;
  /// Member `key` of an object; nullptr when this is no object or lacks it.
  const value* find(const std::string& key) const;

private:
  std::variant<std::monostate, bool, double, std::string, array, object> data_;
};

/// Text that is not the JSON expected; the message names the byte offset.
struct parse_error : troupe_error {
  using troupe_error::troupe_error;
};

/// Parses exactly one value (whitespace around it allowed). Refuses nesting
/// deeper than 32, bad escapes, control characters in strings, trailing
/// bytes, duplicate keys and numbers that are not finite.
value parse(const std::string& text);

/// Compact text, keys in sorted order; parse(write(v)) == v.
std::string write(const value& v);

} // namespace troupe::json
