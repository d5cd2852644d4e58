#pragma once
// One line of the formats embedding models read, parsed into a label, dense
// values and categorical keys grouped by field:
// - Criteo's TSV: label, 13 integer fields, 26 categorical fields (hex
//   strings), tab-separated, any field but the label may be empty;
// - libsvm: "label index:value index:value ...", one field of weighted ids.
// A line that cannot be used throws bad_record naming the field; the reader
// adds the file and line.
#include <cstdint>
#include <string_view>
#include <vector>

#include "tensor/data/formats.hpp"
#include "tensor/data/key_layout.hpp"
#include "tensor/sparse/keys.hpp"

namespace troupe {

/// An example of an embedding model. Field f's keys (and weights, where the
/// format has them) are keys[field_offsets[f] .. field_offsets[f + 1]).
struct sparse_example {
  float label = 0;
  std::vector<float> dense;
  std::vector<int64_t> keys;
  std::vector<float> weights; ///< libsvm's values; empty: every weight 1
  std::vector<uint32_t> field_offsets;
  size_t fields() const { return field_offsets.empty() ? 0 : field_offsets.size() - 1; }
};

namespace criteo {
constexpr int integer_fields = 13;
constexpr int categorical_fields = 26;
/// I1..I13, then one indicator per integer field: an empty field is not a
/// count of 0 (in click logs a missing value says something of its own), so
/// a model gets a weight for "I_i is empty" beside the one on its value.
constexpr int dense_values = 2 * integer_fields;
} // namespace criteo

/// Criteo: label 0 or 1; dense values I1..I13 as a model reads them,
/// sign(x) log(1 + |x|) (an empty field reads 0), then 13 indicators (1 where
/// I_i is empty, else 0); C1..C26 as 26 fields of one
/// key each (field_key(f, value)) or none where the field is empty.
void parse_criteo_line(std::string_view line, sparse_example& out);

/// libsvm: a real label, then index:value pairs (index a non-negative
/// integer, value a finite real) as one field; no dense values.
void parse_libsvm_line(std::string_view line, sparse_example& out);

/// `example` as a row of `layout` (dense values, then each field's key
/// slots; a field's unused slots hold key_layout::no_key) in
/// row[layout.width()]. Throws bad_record where a field holds more keys
/// than its slots, or (`vocabulary` not empty) an id outside its field's
/// range.
void lay_out_example(const sparse_example& example, const key_layout& layout,
                     const fixed_vocabulary& vocabulary, float* row);

} // namespace troupe
