#include "config/node/ini_scan.hpp"

#include <cctype>
#include <map>
#include <set>

namespace troupe::ini {

namespace {

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos)
    return {};
  auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool is_key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

// One pass over the text, a line at a time: at depth 0 of a file a line
// starts with a section header or a key (read_head); the rest of the line
// holds strings, comments and brackets (read_rest). A fault that makes the
// rest unreadable ends the pass (stopped).
class scanner {
public:
  scanner(const std::string& text, const std::string& origin, bool is_file,
          const text_limits& limits, std::vector<std::string>* keys_out)
    : text_(text), origin_(origin), is_file_(is_file), limits_(limits), keys_out_(keys_out) {}

  std::vector<std::string> run() {
    if (text_.size() > limits_.max_bytes) {
      errors_.push_back(origin_ + ": " + std::to_string(text_.size()) + " bytes is more than the "
                        + std::to_string(limits_.max_bytes) + " a configuration may have");
      return errors_;
    }
    while (pos_ < text_.size()) {
      auto eol = text_.find('\n', pos_);
      if (eol == std::string::npos)
        eol = text_.size();
      bool header = depth_ == 0 && is_file_ && read_head(trim(text_.substr(pos_, eol - pos_)));
      if (!header && !read_rest(eol))
        return errors_;
      pos_ = eol + 1;
      ++line_;
    }
    if (depth_ > 0)
      errors_.push_back(origin_ + ": a list opened with '[' is not closed before the end");
    return errors_;
  }

private:
  std::string at() const { return origin_ + (is_file_ ? ":" + std::to_string(line_) : ""); }

  // A section header (true: the line holds nothing else) or the key a line
  // sets, each reported when it appears twice.
  bool read_head(const std::string& head) {
    if (!head.empty() && head[0] == '[') {
      auto close = head.find(']');
      auto name = trim(head.substr(1, close == std::string::npos ? 0 : close - 1));
      if (close == std::string::npos || name.empty()
          || name.find_first_of("[]\"") != std::string::npos)
        return false;
      section_ = name;
      if (!sections_.insert(section_).second)
        errors_.push_back(at() + ": section [" + section_
                          + "] appears twice; merge its keys into one section");
      return true;
    }
    if (head.empty() || head[0] == ';')
      return false;
    size_t n = 0;
    while (n < head.size() && is_key_char(head[n]))
      ++n;
    auto rest = trim(head.substr(n));
    if (n == 0 || rest.empty() || rest[0] != '=')
      return false;
    auto full = section_ + "." + head.substr(0, n);
    auto [it, fresh] = keys_.emplace(full, line_);
    if (!fresh)
      errors_.push_back(at() + ": " + full + " is set twice (first on line "
                        + std::to_string(it->second) + "); keep one");
    else if (keys_out_)
      keys_out_->push_back(full);
    return false;
  }

  // Strings, comments and brackets up to `eol`; false when the pass stops.
  bool read_rest(size_t eol) {
    for (; pos_ < eol; ++pos_) {
      char c = text_[pos_];
      if (c == ';')
        break; // a comment runs to the end of the line
      if (c == '"') {
        if (!read_string())
          return false;
      } else if (!read_bracket(c)) {
        return false;
      }
    }
    return true;
  }

  // A "..." literal from pos_, left on its closing quote.
  bool read_string() {
    size_t start = pos_++;
    while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\n')
      pos_ += text_[pos_] == '\\' ? 2 : 1;
    if (pos_ >= text_.size() || text_[pos_] != '"') {
      errors_.push_back(at() + ": a string is not closed with \" on the line it starts");
      return false;
    }
    if (pos_ - start - 1 > limits_.max_string_bytes) {
      errors_.push_back(at() + ": a string of " + std::to_string(pos_ - start - 1)
                        + " bytes is longer than the " + std::to_string(limits_.max_string_bytes)
                        + " allowed");
      return false;
    }
    return true;
  }

  // The nesting depth after `c`.
  bool read_bracket(char c) {
    if (c == '[' || c == '{') {
      if (++depth_ > limits_.max_nesting) {
        errors_.push_back(at() + ": lists nested more than " + std::to_string(limits_.max_nesting)
                          + " deep; no Troupe key takes more than a list of lists");
        return false;
      }
    } else if (c == ']' || c == '}') {
      if (depth_ == 0) {
        errors_.push_back(at() + ": a '" + std::string(1, c) + "' closes nothing");
        return false;
      }
      --depth_;
    }
    return true;
  }

  const std::string& text_;
  const std::string& origin_;
  bool is_file_;
  const text_limits& limits_;
  std::vector<std::string>* keys_out_;
  std::vector<std::string> errors_;
  std::string section_ = "global";
  std::set<std::string> sections_;
  std::map<std::string, size_t> keys_; // "section.key" -> line
  size_t depth_ = 0;
  size_t line_ = 1;
  size_t pos_ = 0;
};

} // namespace

std::vector<std::string> scan_text(const std::string& text, const std::string& origin, bool is_file,
                                   const text_limits& limits, std::vector<std::string>* keys_out) {
  return scanner(text, origin, is_file, limits, keys_out).run();
}

} // namespace troupe::ini
