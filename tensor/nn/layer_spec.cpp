#include "tensor/nn/layer_spec.hpp"

#include <map>
#include <set>
#include <sstream>

#include "tensor/core/error.hpp"
#include "tensor/core/spec_text.hpp"

namespace troupe {

namespace {

padding padding_of(const spec_text& s) {
  auto p = s.text("padding", "same");
  if (p == "same" || p == "SAME")
    return padding::same;
  if (p == "valid" || p == "VALID")
    return padding::valid;
  s.fail("padding=" + p + " is neither same nor valid");
}

initializer weights_init(const spec_text& s, const char* fallback_kind, float fallback_stddev) {
  static const std::map<std::string, initializer::kind> kinds{
    {"zeros", initializer::kind::zeros},
    {"constant", initializer::kind::constant},
    {"random_normal", initializer::kind::random_normal},
    {"truncated_normal", initializer::kind::truncated_normal},
    {"glorot_uniform", initializer::kind::glorot_uniform}};
  auto name = s.text("init", fallback_kind);
  auto i = kinds.find(name);
  if (i == kinds.end())
    s.fail("init=" + name
           + " is not an initializer (zeros, constant, random_normal, "
             "truncated_normal, glorot_uniform)");
  auto key = i->second == initializer::kind::constant ? "value" : "stddev";
  return {i->second, static_cast<float>(s.real(key, fallback_stddev))};
}

initializer bias_init(const spec_text& s) {
  return {initializer::kind::constant, static_cast<float>(s.real("bias", 0.0))};
}

// The parameters every layer with weights takes.
std::set<std::string> weighted(std::set<std::string> own) {
  own.insert({"name", "init", "stddev", "value", "bias"});
  return own;
}

std::unique_ptr<layer> parse_layer(const spec_text& s, const std::string& kind,
                                   const std::string& default_name, uint64_t seed) {
  auto name = s.text("name", default_name);
  auto positive = [&](const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
    return s.integer(key, fallback, 1);
  };
  if (kind == "dense") {
    s.allow_only(weighted({"units"}), kind);
    return make_dense(name, positive("units"), weights_init(s, "glorot_uniform", 0.1f),
                      bias_init(s));
  }
  if (kind == "conv2d") {
    s.allow_only(weighted({"filters", "kernel", "stride", "padding"}), kind);
    auto k = positive("kernel");
    return make_conv2d(name, positive("filters"), k, k, positive("stride", 1), padding_of(s),
                       weights_init(s, "glorot_uniform", 0.1f), bias_init(s));
  }
  if (kind == "max_pool") {
    s.allow_only({"name", "size", "stride", "padding"}, kind);
    auto size = positive("size", 2);
    return make_max_pool(name, size, positive("stride", size), padding_of(s));
  }
  if (kind == "relu") {
    s.allow_only({"name"}, kind);
    return make_relu(name);
  }
  if (kind == "dropout") {
    s.allow_only({"name", "rate"}, kind);
    auto rate = s.real("rate", 0.5);
    if (!(rate >= 0 && rate < 1))
      s.fail("rate must be in [0, 1)");
    return make_dropout(name, static_cast<float>(rate), seed);
  }
  if (kind == "flatten") {
    s.allow_only({"name"}, kind);
    return make_flatten(name);
  }
  if (kind == "embedding")
    s.fail("an embedding layer comes first in model.layers, over categorical data "
           "(data.categorical-columns, or data.format = criteo or libsvm)");
  s.fail("unknown layer '" + kind
         + "' (known: dense, conv2d, max_pool, relu, dropout, flatten, and embedding first)");
}

} // namespace

bool starts_with_embedding(const std::vector<std::string>& specs) {
  if (specs.empty())
    return false;
  std::string kind;
  std::istringstream(specs[0]) >> kind;
  return kind == "embedding";
}

embedding_layer_spec parse_embedding_layer(const std::vector<std::string>& specs) {
  if (!starts_with_embedding(specs))
    throw troupe_error("model.layers does not start with an embedding layer");
  spec_text s("model.layers[0]", specs[0], 1);
  s.allow_only({"name", "dim", "combiner"}, "embedding");
  embedding_layer_spec out;
  out.name = s.text("name", "embedding0");
  out.dim = s.integer("dim", std::nullopt, 1);
  if (out.dim > 1024)
    s.fail("dim=" + std::to_string(out.dim) + " is outside 1..1024");
  auto how = enum_from_name<combiner>(s.text("combiner", "mean"));
  if (!how)
    s.fail("combiner=" + s.text("combiner", "mean") + " is not sum, mean or sqrtn");
  out.how = *how;
  return out;
}

std::vector<std::unique_ptr<layer>> parse_layers(const std::vector<std::string>& specs,
                                                 uint64_t seed, size_t first) {
  std::vector<std::unique_ptr<layer>> out;
  for (size_t i = first; i < specs.size(); ++i) {
    auto where = "model.layers[" + std::to_string(i) + "]";
    spec_text s(where, specs[i], 1);
    if (s.word_count() == 0)
      throw troupe_error(where + " is empty");
    auto& kind = s.word(0);
    out.push_back(parse_layer(s, kind, kind + std::to_string(i), seed + i));
  }
  return out;
}

} // namespace troupe
