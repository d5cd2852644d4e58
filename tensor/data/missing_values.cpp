// What a CSV set's empty numeric cells become (data.missing-values,
// data.missing-fill), worked out once from the training set's first pass,
// as TF's CSV reader takes a default per column and Criteo's path marks an
// empty integer field: a value (the column's training mean, 0, or the
// user's) and, for a column that has empty cells, an indicator feature.
#include <algorithm>
#include <cmath>

#include "tensor/data/catalog_steps.hpp"

namespace troupe::catalog_steps {

void column_tally::add(const float* values, size_t count) {
  if (sum.size() < count) {
    sum.resize(count, 0.0);
    present.resize(count, 0);
    missing.resize(count, 0);
  }
  for (size_t i = 0; i < count; ++i) {
    if (std::isnan(values[i])) {
      ++missing[i];
    } else {
      sum[i] += values[i];
      ++present[i];
    }
  }
}

void column_tally::merge(const column_tally& other) {
  if (sum.size() < other.sum.size()) {
    sum.resize(other.sum.size(), 0.0);
    present.resize(other.sum.size(), 0);
    missing.resize(other.sum.size(), 0);
  }
  for (size_t i = 0; i < other.sum.size(); ++i) {
    sum[i] += other.sum[i];
    present[i] += other.present[i];
    missing[i] += other.missing[i];
  }
}

namespace {

float policy_value(missing_values policy, const column_tally& all, size_t column) {
  switch (policy) {
    case missing_values::mean:
      return all.present[column] > 0
               ? static_cast<float>(all.sum[column] / static_cast<double>(all.present[column]))
               : 0.0f;
    case missing_values::zero:
      return 0.0f;
    case missing_values::refuse:
      break;
  }
  return std::nanf("");
}

size_t numeric_column_named(const std::vector<std::string>& names, const std::string& column) {
  auto it = std::find(names.begin(), names.end(), column);
  if (it != names.end())
    return static_cast<size_t>(it - names.begin());
  std::string some;
  for (size_t i = 0; i < names.size() && i < 8; ++i)
    some += (i ? ", " : "") + names[i];
  throw data_error("data.missing-fill names column " + quote_input(column)
                   + ", which is not a numeric column of the training set (numeric: "
                   + (names.empty() ? std::string("none") : some)
                   + (names.size() > 8 ? ", ..." : "") + ")");
}

} // namespace

void resolve_missing_values(data_split& train, std::vector<file_scan>& scans) {
  if (train.format != data_format::csv || train.memory)
    return;
  auto& names = scans.front().numeric_columns;
  column_tally all;
  all.sum.resize(names.size(), 0.0);
  all.present.resize(names.size(), 0);
  all.missing.resize(names.size(), 0);
  for (auto& scan : scans)
    all.merge(scan.columns);
  missing_fills fills;
  fills.column = names;
  for (size_t c = 0; c < names.size(); ++c)
    fills.value.push_back(policy_value(train.csv.missing, all, c));
  for (auto& fill : train.csv.missing_fill)
    fills.value[numeric_column_named(names, fill.column)] = fill.value;
  for (size_t c = 0; c < names.size(); ++c)
    fills.indicator.push_back(all.missing[c] > 0 && !std::isnan(fills.value[c]) ? 1 : 0);
  auto indicators = fills.indicators();
  train.csv.fills = std::move(fills);
  if (names.empty())
    train.csv.fills = {}; // nothing numeric: nothing to fill, and the data says so
  for (auto& scan : scans) {
    scan.keys.dense += indicators;
    scan.item_shape = {num_elements(scan.item_shape) + indicators};
  }
}

} // namespace troupe::catalog_steps
