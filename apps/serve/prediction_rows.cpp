#include "apps/serve/prediction_rows.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tensor/checkpoint/json.hpp"
#include "tensor/data/sparse_lines.hpp"

namespace troupe::serve {

namespace {

enum class row_kind { dense, criteo, libsvm };

row_kind kind_of(const model_card& card) {
  if (!card.has_table()) {
    if (card.missing.indicators() > 0)
      throw request_error("this model was trained on CSV data with empty cells (missing-value "
                          "indicators); troupe-serve does not take its rows yet: use "
                          "troupe-predict");
    return row_kind::dense;
  }
  auto& k = card.keys;
  if (k.dense == criteo::dense_values && k.fields == criteo::categorical_fields
      && k.keys_per_field == 1)
    return row_kind::criteo;
  if (k.dense == 0 && k.fields == 1)
    return row_kind::libsvm;
  throw request_error("this model reads keys from CSV columns; troupe-serve takes rows of "
                      "Criteo, libsvm or dense models: use troupe-predict");
}

std::string where(size_t row) {
  return "row " + std::to_string(row) + ": ";
}

// A line without its label gets a label the answer ignores.
std::string labelled(const std::string& line, row_kind kind) {
  if (kind == row_kind::criteo)
    return std::count(line.begin(), line.end(), '\t') == 38 ? "0\t" + line : line;
  auto first = line.find_first_not_of(" \t");
  auto end = line.find_first_of(" \t", first);
  bool has_label = first != std::string::npos
                   && line.substr(first, end - first).find(':') == std::string::npos;
  return has_label ? line : "0 " + line;
}

void read_line(const json::value& v, size_t row, row_kind kind, const model_card& card,
               const fixed_vocabulary& vocabulary, sparse_example& example, float* out) {
  auto* text = v.as_string();
  if (text == nullptr)
    throw request_error(where(row) + "this model takes each row as a string: a "
                        + std::string(kind == row_kind::criteo ? "Criteo" : "libsvm") + " line");
  try {
    auto line = labelled(*text, kind);
    if (kind == row_kind::criteo)
      parse_criteo_line(line, example);
    else
      parse_libsvm_line(line, example);
    lay_out_example(example, card.keys, vocabulary, out);
  } catch (const bad_record& e) {
    throw request_error(where(row) + e.what());
  }
}

void read_numbers(const json::value& v, size_t row, int64_t features, float* out) {
  auto* values = v.as_array();
  if (values == nullptr || static_cast<int64_t>(values->size()) != features)
    throw request_error(where(row) + "this model takes each row as an array of "
                        + std::to_string(features) + " numbers"
                        + (values ? ", not " + std::to_string(values->size()) : std::string()));
  for (size_t i = 0; i < values->size(); ++i) {
    auto* number = (*values)[i].as_number();
    if (number == nullptr || !std::isfinite(*number))
      throw request_error(where(row) + "value " + std::to_string(i) + " is not a finite number");
    out[i] = static_cast<float>(*number);
  }
}

} // namespace

batch read_rows(const std::string& body, const model_card& card) {
  json::value request;
  try {
    request = json::parse(body);
  } catch (const std::exception& e) {
    throw request_error(std::string("the body is not JSON: ") + e.what());
  }
  bool object = request.as_object() != nullptr;
  auto* rows = object ? request.find("rows") : nullptr;
  auto* one = object ? request.find("row") : nullptr;
  if (!object || (rows == nullptr) == (one == nullptr) || (rows && rows->as_array() == nullptr))
    throw request_error("the body must be {\"rows\": [ROW, ...]} or {\"row\": ROW}");
  json::array single;
  if (one)
    single.push_back(*one);
  auto& list = rows ? *rows->as_array() : single;
  if (list.empty() || list.size() > max_rows)
    throw request_error("a request holds 1.." + std::to_string(max_rows) + " rows, not "
                        + std::to_string(list.size()));
  auto kind = kind_of(card);
  auto features = num_elements(card.input);
  batch b;
  b.images = tensor({static_cast<int64_t>(list.size()), features});
  b.labels.assign(list.size(), 0);
  fixed_vocabulary vocabulary;
  if (!card.vocabulary.empty())
    vocabulary = fixed_vocabulary(card.vocabulary, card.ids);
  sparse_example example;
  auto normalized = static_cast<size_t>(card.has_table() ? card.keys.dense : features);
  for (size_t r = 0; r < list.size(); ++r) {
    float* out = b.images.data() + static_cast<int64_t>(r) * features;
    if (kind == row_kind::dense)
      read_numbers(list[r], r, features, out);
    else
      read_line(list[r], r, kind, card, vocabulary, example, out);
    if (card.norm.kind != normalization::none)
      card.norm.apply(out, normalized);
  }
  return b;
}

std::string answer_json(const model_card& card, const tensor& outputs, size_t rows, int64_t version,
                        int64_t step) {
  std::string out = "{\"version\":" + std::to_string(version) + ",\"step\":" + std::to_string(step)
                    + ",\"scores\":[";
  char number[32];
  auto put = [&](double v) {
    std::snprintf(number, sizeof number, "%.7g", v);
    out += number;
  };
  auto classes = card.task == objective::regression ? 1 : card.classes;
  bool binary = card.has_table() && card.task != objective::regression;
  for (size_t r = 0; r < rows; ++r) {
    const float* y = outputs.data() + static_cast<int64_t>(r) * (binary ? 2 : classes);
    if (r)
      out += ",";
    if (card.task == objective::regression) {
      put(y[0]);
    } else if (binary) {
      put(1.0 / (1.0 + std::exp(-static_cast<double>(y[1]))));
    } else {
      double largest = *std::max_element(y, y + classes), sum = 0;
      for (int64_t c = 0; c < classes; ++c)
        sum += std::exp(static_cast<double>(y[c]) - largest);
      out += "[";
      for (int64_t c = 0; c < classes; ++c) {
        if (c)
          out += ",";
        put(std::exp(static_cast<double>(y[c]) - largest) / sum);
      }
      out += "]";
    }
  }
  return out + "]}";
}

} // namespace troupe::serve
