#include "tensor/core/json_writer.hpp"

#include <cstdio>
#include <stdexcept>

namespace troupe {

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
          out += escape;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string json_string(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

void json_writer::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!empty_.empty()) {
    if (!empty_.back())
      out_ += ',';
    empty_.back() = false;
  }
}

json_writer& json_writer::open(char bracket) {
  before_value();
  out_ += bracket;
  empty_.push_back(true);
  return *this;
}

json_writer& json_writer::close(char bracket) {
  empty_.pop_back();
  out_ += bracket;
  return *this;
}

json_writer& json_writer::key(std::string_view name) {
  before_value();
  append_json_string(out_, name);
  out_ += ':';
  after_key_ = true;
  return *this;
}

json_writer& json_writer::string(std::string_view text) {
  before_value();
  append_json_string(out_, text);
  return *this;
}

json_writer& json_writer::boolean(bool value) {
  return raw(value ? "true" : "false");
}

json_writer& json_writer::null() {
  return raw("null");
}

json_writer& json_writer::number(double value, const char* printf_format) {
  char text[64];
  int length = std::snprintf(text, sizeof text, printf_format, value);
  if (length < 0)
    throw std::invalid_argument(std::string("json_writer: bad number format ") + printf_format);
  if (static_cast<size_t>(length) < sizeof text)
    return raw(std::string_view(text, static_cast<size_t>(length)));
  std::string long_text(static_cast<size_t>(length) + 1, '\0'); // "%.1f" of 1e300
  std::snprintf(long_text.data(), long_text.size(), printf_format, value);
  long_text.pop_back();
  return raw(long_text);
}

json_writer& json_writer::raw(std::string_view json) {
  before_value();
  out_ += json;
  return *this;
}

} // namespace troupe
