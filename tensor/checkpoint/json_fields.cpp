#include "tensor/checkpoint/json_fields.hpp"

#include <cmath>

namespace troupe::json {

array shape_json(const shape_t& shape) {
  array out;
  for (auto d : shape)
    out.emplace_back(d);
  return out;
}

void fields::fail(const std::string& key, const std::string& what) const {
  throw checkpoint_error(path + ": " + where + "\"" + key + "\" " + what);
}

const value& fields::get(const std::string& key) const {
  auto* f = v.find(key);
  if (f == nullptr)
    throw checkpoint_error(path + ": " + where + "lacks \"" + key + "\"");
  return *f;
}

int64_t fields::integer(const std::string& key, int64_t min, int64_t max) const {
  auto i = get(key).as_int();
  if (!i || *i < min || *i > max)
    fail(key, "must be an integer in " + std::to_string(min) + ".." + std::to_string(max));
  return *i;
}

std::string fields::text(const std::string& key) const {
  auto* s = get(key).as_string();
  if (s == nullptr)
    fail(key, "must be a string");
  return *s;
}

const array& fields::list(const std::string& key) const {
  auto* a = get(key).as_array();
  if (a == nullptr)
    fail(key, "must be an array");
  return *a;
}

shape_t fields::shape(const std::string& key) const {
  shape_t out;
  for (auto& d : list(key)) {
    auto n = d.as_int();
    if (!n || *n < 0 || *n > (int64_t{1} << 40))
      fail(key, "holds a dimension that is not a size");
    out.push_back(*n);
  }
  return out;
}

std::vector<std::string> fields::strings(const std::string& key) const {
  std::vector<std::string> out;
  for (auto& e : list(key)) {
    auto* s = e.as_string();
    if (s == nullptr)
      fail(key, "must hold strings");
    out.push_back(*s);
  }
  return out;
}

std::vector<float> fields::numbers(const std::string& key) const {
  std::vector<float> out;
  for (auto& e : list(key)) {
    auto* d = e.as_number();
    if (d == nullptr || !std::isfinite(*d))
      fail(key, "must hold finite numbers");
    out.push_back(static_cast<float>(*d));
  }
  return out;
}

std::map<std::string, std::string> fields::named_texts(const std::string& key) const {
  auto* members = get(key).as_object();
  if (members == nullptr)
    fail(key, "must be an object");
  std::map<std::string, std::string> out;
  for (auto& [name, member] : *members) {
    auto* s = member.as_string();
    if (s == nullptr)
      fail(key, "holds \"" + name + "\", which is not a string");
    out.emplace(name, *s);
  }
  return out;
}

} // namespace troupe::json
