#pragma once
// Reading the objects of a JSON file (a checkpoint manifest, a model card)
// field by field: each read names the file, what the object is and the
// field that is missing or wrong, as a checkpoint_error. Shapes are written
// as arrays of dimensions.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor/checkpoint/json.hpp"
#include "tensor/checkpoint/safetensors.hpp"
#include "tensor/core/tensor.hpp"

namespace troupe::json {

/// [d0, d1, ...]: a shape as fields::shape reads it.
array shape_json(const shape_t& shape);

struct fields {
  const std::string& path; ///< the file, first in every message
  const value& v;          ///< the object read
  std::string where;       ///< what it is, before the key ("a tensor "); may be empty

  /// The member `key`, which must be there.
  const value& get(const std::string& key) const;
  /// An integer in min..max.
  int64_t integer(const std::string& key, int64_t min, int64_t max) const;
  std::string text(const std::string& key) const;
  const array& list(const std::string& key) const;
  /// A list of sizes (0 .. 2^40).
  shape_t shape(const std::string& key) const;
  /// A list of strings.
  std::vector<std::string> strings(const std::string& key) const;
  /// A list of finite numbers.
  std::vector<float> numbers(const std::string& key) const;
  /// An object of strings (name -> text).
  std::map<std::string, std::string> named_texts(const std::string& key) const;

private:
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
};

} // namespace troupe::json
