#include "tensor/nn/layer_spec.hpp"

#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "tensor/core/error.hpp"

namespace troupe {

namespace {

struct spec {
  std::string kind;
  std::map<std::string, std::string> params;
};

class spec_reader {
public:
  spec_reader(size_t index, const std::string& text, const std::set<std::string>& allowed,
              spec s)
    : where_("model.layers[" + std::to_string(index) + "] \"" + text + "\""), s_(std::move(s)) {
    for (auto& kv : s_.params)
      if (!allowed.count(kv.first)) {
        std::string list;
        for (auto& a : allowed)
          list += (list.empty() ? "" : ", ") + a;
        fail("unknown parameter '" + kv.first + "' for " + s_.kind + " (it takes: "
             + (list.empty() ? "nothing" : list) + ")");
      }
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw troupe_error(where_ + ": " + what);
  }

  bool has(const std::string& key) const { return s_.params.count(key) > 0; }

  std::string text(const std::string& key, const std::string& fallback) const {
    auto i = s_.params.find(key);
    return i == s_.params.end() ? fallback : i->second;
  }

  int64_t integer(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    auto i = s_.params.find(key);
    if (i == s_.params.end()) {
      if (!fallback)
        fail("missing parameter '" + key + "'");
      return *fallback;
    }
    char* end = nullptr;
    auto v = std::strtoll(i->second.c_str(), &end, 10);
    if (*end != '\0' || i->second.empty() || v < 1)
      fail(key + "=" + i->second + " is not a positive integer");
    return v;
  }

  double real(const std::string& key, double fallback) const {
    auto i = s_.params.find(key);
    if (i == s_.params.end())
      return fallback;
    char* end = nullptr;
    auto v = std::strtod(i->second.c_str(), &end);
    if (*end != '\0' || i->second.empty())
      fail(key + "=" + i->second + " is not a number");
    return v;
  }

  padding pad() const {
    auto p = text("padding", "same");
    if (p == "same" || p == "SAME")
      return padding::same;
    if (p == "valid" || p == "VALID")
      return padding::valid;
    fail("padding=" + p + " is neither same nor valid");
  }

  initializer weights_init(const char* fallback_kind, float fallback_stddev) const {
    static const std::map<std::string, initializer::kind> kinds{
      {"zeros", initializer::kind::zeros},
      {"constant", initializer::kind::constant},
      {"random_normal", initializer::kind::random_normal},
      {"truncated_normal", initializer::kind::truncated_normal},
      {"glorot_uniform", initializer::kind::glorot_uniform}};
    auto name = text("init", fallback_kind);
    auto i = kinds.find(name);
    if (i == kinds.end())
      fail("init=" + name + " is not an initializer (zeros, constant, random_normal, "
           "truncated_normal, glorot_uniform)");
    return {i->second, static_cast<float>(real(i->second == initializer::kind::constant
                                                   ? "value"
                                                   : "stddev",
                                               fallback_stddev))};
  }

  initializer bias_init() const {
    return {initializer::kind::constant, static_cast<float>(real("bias", 0.0))};
  }

private:
  std::string where_;
  spec s_;
};

spec split(size_t index, const std::string& text) {
  std::istringstream in(text);
  spec s;
  in >> s.kind;
  for (std::string word; in >> word;) {
    auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == word.size())
      throw troupe_error("model.layers[" + std::to_string(index) + "] \"" + text + "\": '"
                         + word + "' is not key=value");
    s.params[word.substr(0, eq)] = word.substr(eq + 1);
  }
  if (s.kind.empty())
    throw troupe_error("model.layers[" + std::to_string(index) + "] is empty");
  return s;
}

} // namespace

std::vector<std::unique_ptr<layer>> parse_layers(const std::vector<std::string>& specs,
                                                 uint64_t seed) {
  std::vector<std::unique_ptr<layer>> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto s = split(i, specs[i]);
    auto default_name = s.kind + std::to_string(i);
    const std::set<std::string> weighted{"name", "init", "stddev", "value", "bias"};
    auto with = [&](std::set<std::string> extra) {
      extra.insert(weighted.begin(), weighted.end());
      return extra;
    };
    if (s.kind == "dense") {
      spec_reader r(i, specs[i], with({"units"}), s);
      out.push_back(make_dense(r.text("name", default_name), r.integer("units"),
                               r.weights_init("glorot_uniform", 0.1f), r.bias_init()));
    } else if (s.kind == "conv2d") {
      spec_reader r(i, specs[i], with({"filters", "kernel", "stride", "padding"}), s);
      auto k = r.integer("kernel");
      out.push_back(make_conv2d(r.text("name", default_name), r.integer("filters"), k, k,
                                r.integer("stride", 1), r.pad(),
                                r.weights_init("glorot_uniform", 0.1f), r.bias_init()));
    } else if (s.kind == "max_pool") {
      spec_reader r(i, specs[i], {"name", "size", "stride", "padding"}, s);
      auto size = r.integer("size", 2);
      out.push_back(make_max_pool(r.text("name", default_name), size, r.integer("stride", size),
                                  r.pad()));
    } else if (s.kind == "relu") {
      spec_reader r(i, specs[i], {"name"}, s);
      out.push_back(make_relu(r.text("name", default_name)));
    } else if (s.kind == "dropout") {
      spec_reader r(i, specs[i], {"name", "rate"}, s);
      auto rate = r.real("rate", 0.5);
      if (!(rate >= 0 && rate < 1))
        r.fail("rate must be in [0, 1)");
      out.push_back(make_dropout(r.text("name", default_name), static_cast<float>(rate),
                                 seed + i));
    } else if (s.kind == "flatten") {
      spec_reader r(i, specs[i], {"name"}, s);
      out.push_back(make_flatten(r.text("name", default_name)));
    } else {
      throw troupe_error("model.layers[" + std::to_string(i) + "] \"" + specs[i]
                         + "\": unknown layer '" + s.kind
                         + "' (known: dense, conv2d, max_pool, relu, dropout, flatten)");
    }
  }
  return out;
}

} // namespace troupe
