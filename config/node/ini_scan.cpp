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

} // namespace

std::vector<std::string> scan_text(const std::string& text, const std::string& origin, bool is_file,
                                   const text_limits& limits, std::vector<std::string>* keys_out) {
  std::vector<std::string> errors;
  auto at = [&](size_t line) { return origin + (is_file ? ":" + std::to_string(line) : ""); };
  if (text.size() > limits.max_bytes) {
    errors.push_back(origin + ": " + std::to_string(text.size()) + " bytes is more than the "
                     + std::to_string(limits.max_bytes) + " a configuration may have");
    return errors;
  }
  std::string section = "global";
  std::set<std::string> sections;
  std::map<std::string, size_t> keys; // "section.key" -> line
  size_t depth = 0;
  size_t line = 1;
  size_t pos = 0;
  while (pos < text.size()) {
    // At depth 0 a line starts a section header or a key; inside brackets it
    // continues a value.
    auto eol = text.find('\n', pos);
    if (eol == std::string::npos)
      eol = text.size();
    if (depth == 0 && is_file) {
      auto head = trim(text.substr(pos, eol - pos));
      if (!head.empty() && head[0] == '[') {
        auto close = head.find(']');
        auto name = trim(head.substr(1, close == std::string::npos ? 0 : close - 1));
        if (close != std::string::npos && !name.empty()
            && name.find_first_of("[]\"") == std::string::npos) {
          section = name;
          if (!sections.insert(section).second)
            errors.push_back(at(line) + ": section [" + section
                             + "] appears twice; merge its keys into one section");
          pos = eol + 1;
          ++line;
          continue;
        }
      } else if (!head.empty() && head[0] != ';') {
        size_t n = 0;
        while (n < head.size() && is_key_char(head[n]))
          ++n;
        auto rest = trim(head.substr(n));
        if (n > 0 && !rest.empty() && rest[0] == '=') {
          auto full = section + "." + head.substr(0, n);
          auto [it, fresh] = keys.emplace(full, line);
          if (!fresh)
            errors.push_back(at(line) + ": " + full + " is set twice (first on line "
                             + std::to_string(it->second) + "); keep one");
          else if (keys_out)
            keys_out->push_back(full);
        }
      }
    }
    // The rest of the line: strings, comments and brackets.
    for (; pos < eol; ++pos) {
      char c = text[pos];
      if (c == ';')
        break; // a comment runs to the end of the line
      if (c == '"') {
        size_t start = pos++;
        while (pos < text.size() && text[pos] != '"' && text[pos] != '\n')
          pos += text[pos] == '\\' ? 2 : 1;
        if (pos >= text.size() || text[pos] != '"') {
          errors.push_back(at(line) + ": a string is not closed with \" on the line it starts");
          return errors;
        }
        if (pos - start - 1 > limits.max_string_bytes) {
          errors.push_back(at(line) + ": a string of " + std::to_string(pos - start - 1)
                           + " bytes is longer than the " + std::to_string(limits.max_string_bytes)
                           + " allowed");
          return errors;
        }
        continue;
      }
      if (c == '[' || c == '{') {
        if (++depth > limits.max_nesting) {
          errors.push_back(at(line) + ": lists nested more than "
                           + std::to_string(limits.max_nesting)
                           + " deep; no Troupe key takes more than a list of lists");
          return errors;
        }
      } else if (c == ']' || c == '}') {
        if (depth == 0) {
          errors.push_back(at(line) + ": a '" + std::string(1, c) + "' closes nothing");
          return errors;
        }
        --depth;
      }
    }
    pos = eol + 1;
    ++line;
  }
  if (depth > 0)
    errors.push_back(origin + ": a list opened with '[' is not closed before the end");
  return errors;
}

} // namespace troupe::ini
