#include "config/node/ini_checks.hpp"

#include <algorithm>
#include <fstream>

#include <caf/config_value.hpp>
#include <caf/settings.hpp>

namespace troupe::ini {

std::string type_hint(const caf::config_option& opt) {
  auto t = str(opt.type_name());
  if (opt.category() == "cluster" && t.find("list") != std::string::npos)
    return "a list of \"host:port\" strings, e.g. [\"127.0.0.1:7001\"]";
  if (t.find("list") != std::string::npos)
    return "a list (" + t
           + "), e.g. [1000, 2000], [0.1, 0.01, 0.001] or [\"relu\"]; write "
             "every real with a decimal point";
  if (t == "timespan")
    return "a duration with a unit, e.g. 30s or 500ms";
  if (t == "string")
    return "a string in double quotes";
  if (t.find("int") != std::string::npos)
    return "an integer";
  if (t == "real64" || t == "real32" || t == "real")
    return "a number";
  if (t == "boolean")
    return "true or false";
  return t;
}

namespace {

// Keys whose value is a count or a word (replicas-to-aggregate = 2 or
// "all"): text options that take an integer as its digits.
bool count_or_word(const std::string& full_name) {
  return full_name == "train.replicas-to-aggregate";
}

} // namespace

std::vector<std::string> known_names(const node_config& cfg) {
  std::vector<std::string> out;
  for (auto& opt : cfg.options())
    out.push_back(str(opt.full_name()));
  return out;
}

void check_file_keys(const node_config& cfg, const std::string& path, std::istream& in,
                     const std::vector<std::string>& keys, std::vector<std::string>& errors) {
  caf::actor_system_config raw;
  if (auto err = raw.parse(caf::actor_system_config::string_list{}, in)) {
    errors.push_back(path + ": syntax error: " + caf::to_string(err)
                     + " (INI syntax: [section], key = value, strings in double quotes, "
                       "comments start with ';')");
    return;
  }
  auto names = known_names(cfg);
  for (auto& [category, value] : caf::content(raw)) {
    auto* section = caf::get_if<caf::settings>(&value);
    if (!section) {
      // A top-level key outside any [section].
      auto opt = cfg.options().qualified_name_lookup("global", category);
      if (!opt)
        errors.push_back(path + ": unknown key '" + category + "' outside any section");
      continue;
    }
    for (auto& [key, val] : *section) {
      auto opt = cfg.options().qualified_name_lookup(category, key);
      std::string full = category + "." + key;
      if (!opt) {
        auto suggestion = closest_match(full, names);
        errors.push_back(path + ": unknown key '" + full + "'"
                         + (suggestion.empty() ? " (see troupe-node --help for every key)"
                                               : "; did you mean '" + suggestion + "'?"));
        continue;
      }
      if (count_or_word(full) && caf::holds_alternative<caf::config_value::integer>(val))
        continue;
      if (opt->check(val)) {
        // An integer where a real is expected is fine (learning-rate = 1).
        if (caf::holds_alternative<caf::config_value::integer>(val)
            && !opt->check(
              caf::config_value{static_cast<double>(caf::get<caf::config_value::integer>(val))}))
          continue;
        errors.push_back(path + ": " + full + " = " + caf::to_string(val) + " has the wrong type; "
                         + "expected " + type_hint(*opt));
      }
    }
  }
  // CAF drops a value it cannot store in its option (a negative number for
  // an unsigned key) without a word: such a key is missing from the result.
  for (auto& full : keys) {
    auto dot = full.find('.');
    auto category = full.substr(0, dot);
    auto opt = cfg.options().qualified_name_lookup(category, full.substr(dot + 1));
    if (category != "global" && opt && !caf::get_if(&caf::content(raw), full))
      errors.push_back(path + ": " + full + " has a value that cannot be used; expected "
                       + type_hint(*opt)
                       + (str(opt->type_name()).rfind("uint", 0) == 0 ? " (not negative)" : ""));
  }
}

void coerce_reals(node_config& cfg, const std::string& path, const std::vector<std::string>& cli) {
  std::ifstream in(path);
  caf::actor_system_config raw;
  if (raw.parse(caf::actor_system_config::string_list{}, in))
    return;
  for (auto& [category, value] : caf::content(raw)) {
    auto* section = caf::get_if<caf::settings>(&value);
    if (!section)
      continue;
    for (auto& [key, val] : *section) {
      auto opt = cfg.options().qualified_name_lookup(category, key);
      if (!opt || !caf::holds_alternative<caf::config_value::integer>(val))
        continue;
      auto number = caf::get<caf::config_value::integer>(val);
      caf::config_value as_real{static_cast<double>(number)};
      auto flag = "--" + category + "." + key + "=";
      bool on_cli = std::any_of(cli.begin(), cli.end(),
                                [&](const std::string& arg) { return arg.rfind(flag, 0) == 0; });
      if (on_cli)
        continue;
      if (count_or_word(category + "." + key))
        opt->store(caf::config_value{std::to_string(number)});
      else if (opt->check(val) && !opt->check(as_real))
        opt->store(as_real);
    }
  }
}

} // namespace troupe::ini
