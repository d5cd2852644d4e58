#pragma once
// What CAF 0.17's INI parser lets through, caught: it drops unknown keys and
// wrongly typed values without a word, and binds an integer where a real is
// expected to nothing. Internal to config/node.
#include <istream>
#include <string>
#include <vector>

#include <caf/config_option.hpp>

#include "config/node/node_config.hpp"

namespace troupe::ini {

/// "an integer", "a duration with a unit, e.g. 30s or 500ms", ...
std::string type_hint(const caf::config_option& opt);

/// Every key of `cfg` as "section.key".
std::vector<std::string> known_names(const node_config& cfg);

/// Reads the file with no Troupe option declared, so that every value keeps
/// the type it was written with; reports syntax errors, unknown keys (with
/// the closest known one) and values of the wrong type. `keys` are the keys
/// the file sets (ini::scan_text): one CAF dropped while parsing (a negative
/// number for an unsigned key) is reported too.
void check_file_keys(const node_config& cfg, const std::string& path, std::istream& in,
                     const std::vector<std::string>& keys, std::vector<std::string>& errors);

/// Stores integers written for real-valued keys (learning-rate = 1), and for
/// keys that take a count or a word (replicas-to-aggregate = 2), that CAF
/// left unbound, unless the command line set the key.
void coerce_reals(node_config& cfg, const std::string& path, const std::vector<std::string>& cli);

/// A string_view of CAF's as a string.
inline std::string str(caf::string_view v) {
  return std::string(v.data(), v.size());
}

} // namespace troupe::ini
