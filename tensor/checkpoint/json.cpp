#include "tensor/checkpoint/json.hpp"

#include <cmath>
#include <cstdlib>

#include "tensor/core/json_writer.hpp"

namespace troupe::json {

std::optional<int64_t> value::as_int() const {
  auto* d = as_number();
  constexpr double exact = 9007199254740992.0; // 2^53
  if (d == nullptr || *d != std::floor(*d) || *d > exact || *d < -exact)
    return std::nullopt;
  return static_cast<int64_t>(*d);
}

const value* value::find(const std::string& key) const {
  auto* o = as_object();
  if (o == nullptr)
    return nullptr;
  auto i = o->find(key);
  return i == o->end() ? nullptr : &i->second;
}

namespace {

constexpr int max_depth = 32;

class parser {
public:
  explicit parser(const std::string& text) : text_(text) {}

  value document() {
    auto v = any(0);
    skip_space();
    if (pos_ != text_.size())
      fail("trailing bytes after the value");
    return v;
  }

private:
  [[noreturn]] void fail(const std::string& what) const {
    throw parse_error("invalid JSON at byte " + std::to_string(pos_) + ": " + what);
  }

  void skip_space() {
    while (
      pos_ < text_.size()
      && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t'))
      ++pos_;
  }

  char peek() {
    skip_space();
    if (pos_ >= text_.size())
      fail("unexpected end");
    return text_[pos_];
  }

  void expect(const char* word) {
    for (const char* c = word; *c != '\0'; ++c, ++pos_)
      if (pos_ >= text_.size() || text_[pos_] != *c)
        fail(std::string("expected '") + word + "'");
  }

  value any(int depth) {
    if (depth > max_depth)
      fail("nested deeper than " + std::to_string(max_depth));
    switch (peek()) {
      case '{':
        return members(depth);
      case '[':
        return elements(depth);
      case '"':
        return string();
      case 't':
        expect("true");
        return true;
      case 'f':
        expect("false");
        return false;
      case 'n':
        expect("null");
        return {};
      default:
        return number();
    }
  }

  // An object's or an array's items, `item` reading each, up to `close`.
  template <class Item>
  void items(char close, Item item) {
    ++pos_; // '{' or '['
    if (peek() == close) {
      ++pos_;
      return;
    }
    for (;;) {
      item();
      auto c = peek();
      ++pos_;
      if (c == close)
        return;
      if (c != ',')
        fail(std::string("expected ',' or '") + close + "'");
    }
  }

  value members(int depth) {
    object out;
    items('}', [&] {
      if (peek() != '"')
        fail("expected a key");
      auto key = string();
      if (peek() != ':')
        fail("expected ':'");
      ++pos_;
      if (out.count(key) > 0)
        fail("duplicate key \"" + key + "\"");
      out.emplace(std::move(key), any(depth + 1));
    });
    return out;
  }

  value elements(int depth) {
    array out;
    items(']', [&] { out.push_back(any(depth + 1)); });
    return out;
  }

  static void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  unsigned hex4() {
    if (pos_ + 4 > text_.size())
      fail("short \\u escape");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_++];
      code <<= 4;
      if (c >= '0' && c <= '9')
        code |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        code |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        code |= static_cast<unsigned>(c - 'A' + 10);
      else
        fail("bad \\u escape");
    }
    return code;
  }

  std::string string() {
    ++pos_; // '"'
    std::string out;
    for (;;) {
      if (pos_ >= text_.size())
        fail("unterminated string");
      char c = text_[pos_++];
      if (c == '"')
        return out;
      if (static_cast<unsigned char>(c) < 0x20)
        fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size())
        fail("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned code = hex4();
          if (code >= 0xD800 && code < 0xDC00) { // a surrogate pair
            if (pos_ + 2 > text_.size() || text_[pos_] != '\\' || text_[pos_ + 1] != 'u')
              fail("lone surrogate");
            pos_ += 2;
            unsigned low = hex4();
            if (low < 0xDC00 || low >= 0xE000)
              fail("bad surrogate pair");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          } else if (code >= 0xDC00 && code < 0xE000) {
            fail("lone surrogate");
          }
          append_utf8(out, code);
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }

  value number() {
    size_t start = pos_;
    auto digits = [&] {
      size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
        ++pos_;
      return pos_ > from;
    };
    if (pos_ < text_.size() && text_[pos_] == '-')
      ++pos_;
    if (!digits())
      fail("expected a value");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (!digits())
        fail("expected digits after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-'))
        ++pos_;
      if (!digits())
        fail("expected an exponent");
    }
    double d = std::strtod(text_.substr(start, pos_ - start).c_str(), nullptr);
    if (!std::isfinite(d))
      fail("number out of range");
    return d;
  }

  const std::string& text_;
  size_t pos_ = 0;
};

void write_value(const value& v, json_writer& out) {
  if (v.is_null()) {
    out.null();
  } else if (auto* b = v.as_bool()) {
    out.boolean(*b);
  } else if (auto i = v.as_int()) {
    out.integer(*i);
  } else if (auto* d = v.as_number()) {
    out.number(*d, "%.17g");
  } else if (auto* s = v.as_string()) {
    out.string(*s);
  } else if (auto* a = v.as_array()) {
    out.begin_array();
    for (auto& element : *a)
      write_value(element, out);
    out.end_array();
  } else if (auto* o = v.as_object()) {
    out.begin_object();
    for (auto& [key, member] : *o) {
      out.key(key);
      write_value(member, out);
    }
    out.end_object();
  }
}

} // namespace

value parse(const std::string& text) {
  return parser{text}.document();
}

std::string write(const value& v) {
  json_writer out;
  write_value(v, out);
  return out.text();
}

} // namespace troupe::json
