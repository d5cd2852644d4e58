#include "tensor/data/sparse_lines.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "tensor/sparse/keys.hpp"

namespace troupe {

namespace {

template <class T>
bool parse_number(std::string_view text, T& value) {
  if (!text.empty() && text.front() == '+')
    text.remove_prefix(1);
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

// strtof, as from_chars for floats is missing from GCC 12's library.
bool parse_real(std::string_view text, float& value) {
  std::string copy(text);
  char* end = nullptr;
  value = std::strtof(copy.c_str(), &end);
  return !copy.empty() && end == copy.c_str() + copy.size() && std::isfinite(value);
}

void start(sparse_example& out) {
  out.dense.clear();
  out.keys.clear();
  out.weights.clear();
  out.field_offsets.assign(1, 0);
}

} // namespace

void parse_criteo_line(std::string_view line, sparse_example& out) {
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  start(out);
  constexpr size_t expected = 1 + criteo::integer_fields + criteo::categorical_fields;
  std::string_view fields[expected];
  size_t count = 0;
  for (size_t begin = 0;; ++count) {
    auto tab = line.find('\t', begin);
    if (count < expected)
      fields[count] = line.substr(begin, tab - begin);
    if (tab == std::string_view::npos)
      break;
    begin = tab + 1;
  }
  if (++count != expected)
    throw bad_record("a Criteo line holds 40 tab-separated fields (label, I1-I13, C1-C26); "
                     "this one holds "
                     + std::to_string(count));
  if (fields[0] != "0" && fields[0] != "1")
    throw bad_record("the label must be 0 or 1, not " + quote_input(fields[0]));
  out.label = fields[0] == "1" ? 1.0f : 0.0f;
  for (int i = 1; i <= criteo::integer_fields; ++i) {
    int64_t value = 0;
    if (!fields[i].empty() && !parse_number(fields[i], value))
      throw bad_record("I" + std::to_string(i) + " = " + quote_input(fields[i])
                       + " is not an integer");
    // Counts span orders of magnitude: the model sees sign(x) log(1 + |x|).
    double x = static_cast<double>(value);
    out.dense.push_back(static_cast<float>(std::copysign(std::log1p(std::fabs(x)), x)));
  }
  for (int i = 1; i <= criteo::integer_fields; ++i)
    out.dense.push_back(fields[i].empty() ? 1.0f : 0.0f);
  for (uint32_t c = 0; c < criteo::categorical_fields; ++c) {
    auto value = fields[1 + criteo::integer_fields + c];
    if (!value.empty())
      out.keys.push_back(field_key(c, value));
    out.field_offsets.push_back(static_cast<uint32_t>(out.keys.size()));
  }
}

void lay_out_example(const sparse_example& example, const key_layout& layout,
                     const fixed_vocabulary& vocabulary, float* row) {
  std::fill(row, row + layout.width(), 0.0f);
  std::copy(example.dense.begin(), example.dense.end(), row);
  float* slots = row + layout.dense;
  for (size_t f = 0; f < example.fields(); ++f) {
    auto first = example.field_offsets[f], end = example.field_offsets[f + 1];
    if (end - first > static_cast<uint32_t>(layout.keys_per_field))
      throw bad_record(std::to_string(end - first) + " keys, more than data.max-keys = "
                       + std::to_string(layout.keys_per_field) + "; raise it");
    for (int64_t s = 0; s < layout.keys_per_field; ++s) {
      auto at = first + static_cast<uint32_t>(s);
      float* slot = slots
                    + (static_cast<int64_t>(f) * layout.keys_per_field + s)
                        * key_layout::floats_per_key;
      if (at >= end) {
        pack_key(key_layout::no_key, 0.0f, slot);
        continue;
      }
      if (!vocabulary.empty()) // a fixed-size table's id out of its field's range
        try {
          vocabulary.row_of(example.keys[at], static_cast<uint32_t>(f));
        } catch (const data_error& e) {
          throw bad_record(e.what());
        }
      pack_key(example.keys[at], example.weights.empty() ? 1.0f : example.weights[at], slot);
    }
  }
}

void parse_libsvm_line(std::string_view line, sparse_example& out) {
  start(out);
  std::string_view rest = line;
  auto token = [&] {
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t' || rest.front() == '\r'))
      rest.remove_prefix(1);
    auto end = rest.find_first_of(" \t\r");
    auto t = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    return t;
  };
  auto label = token();
  if (!parse_real(label, out.label))
    throw bad_record("the label " + quote_input(label) + " is not a finite number");
  for (auto pair = token(); !pair.empty(); pair = token()) {
    auto colon = pair.find(':');
    int64_t index = -1;
    float value = 0;
    if (colon == std::string_view::npos || !parse_number(pair.substr(0, colon), index) || index < 0
        || index > max_plain_id || !parse_real(pair.substr(colon + 1), value))
      throw bad_record(quote_input(pair)
                       + " is not index:value (a non-negative integer index below 2^48, a "
                         "finite value)");
    out.keys.push_back(index);
    out.weights.push_back(value);
  }
  out.field_offsets.push_back(static_cast<uint32_t>(out.keys.size()));
}

} // namespace troupe
