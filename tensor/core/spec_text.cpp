#include "tensor/core/spec_text.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <sstream>

#include "tensor/core/error.hpp"

namespace troupe {

spec_text::spec_text(const std::string& where, const std::string& text, size_t leading,
                     std::string usage)
  : prefix_(where + " \"" + text + "\""), usage_(std::move(usage)) {
  std::istringstream in(text);
  for (std::string word; in >> word;) {
    if (words_.size() < leading && word.find('=') == std::string::npos) {
      words_.push_back(word);
      continue;
    }
    auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == word.size())
      fail("'" + word + "' is not key=value");
    if (!pairs_.emplace(word.substr(0, eq), word.substr(eq + 1)).second)
      fail(word.substr(0, eq) + " is given twice");
  }
}

void spec_text::fail(const std::string& what) const {
  throw troupe_error(prefix_ + ": " + what + (usage_.empty() ? "" : " (" + usage_ + ")"));
}

void spec_text::allow_only(const std::set<std::string>& allowed, const std::string& owner) const {
  for (auto& [key, value] : pairs_)
    if (!allowed.count(key)) {
      std::string list;
      for (auto& a : allowed)
        list += (list.empty() ? "" : ", ") + a;
      fail("unknown parameter '" + key + "' for " + owner
           + " (it takes: " + (list.empty() ? "nothing" : list) + ")");
    }
}

std::string spec_text::text(const std::string& key, const std::string& fallback) const {
  auto i = pairs_.find(key);
  return i == pairs_.end() ? fallback : i->second;
}

int64_t spec_text::integer(const std::string& key, std::optional<int64_t> fallback,
                           int64_t min) const {
  auto i = pairs_.find(key);
  if (i == pairs_.end()) {
    if (!fallback)
      fail("missing parameter '" + key + "'");
    return *fallback;
  }
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(i->second.c_str(), &end, 10);
  if (*end != '\0' || errno != 0)
    fail(key + "=" + i->second + ": '" + i->second + "' is not an integer");
  if (v < min)
    fail(key + "=" + i->second
         + (min == 1 ? " is not a positive integer" : " must be at least " + std::to_string(min)));
  return v;
}

double spec_text::real(const std::string& key, double fallback) const {
  auto i = pairs_.find(key);
  if (i == pairs_.end())
    return fallback;
  char* end = nullptr;
  auto v = std::strtod(i->second.c_str(), &end);
  if (*end != '\0')
    fail(key + "=" + i->second + " is not a number");
  return v;
}

} // namespace troupe
