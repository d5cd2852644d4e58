#pragma once
// A lexical pass over the config text before CAF's INI parser sees it. The
// parser recurses once per bracket (50,000 nested lists overflow the stack),
// keeps the last of two equal keys or sections without a word, and reads
// strings of any length. This pass bounds all three and needs no CAF.
#include <cstddef>
#include <string>
#include <vector>

namespace troupe::ini {

/// What the scan accepts; the defaults are far above any real config.
struct text_limits {
  size_t max_bytes = 1 << 20;     ///< the whole file (or one command-line argument)
  size_t max_string_bytes = 4096; ///< one "..." literal
  size_t max_nesting = 4;         ///< [ and { open at once
};

/// Problems in `text`, each naming `origin` and the line: a file or argument
/// too large, a string too long or unterminated, brackets nested too deep or
/// unbalanced, and (for a file) a section or a key within a section that
/// appears twice. `keys`, if given, receives every "section.key" the file sets.
std::vector<std::string> scan_text(const std::string& text, const std::string& origin, bool is_file,
                                   const text_limits& limits = {},
                                   std::vector<std::string>* keys = nullptr);

} // namespace troupe::ini
