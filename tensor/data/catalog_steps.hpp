#pragma once
// The steps catalog_data takes (catalog.hpp), each in its own file: the
// label survey (label_survey.cpp), the normalisation (normalizer.cpp); and
// how labels are read as written, which the survey and example_source share.
// Included by tensor/data's catalog files only.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/data/catalog.hpp"

namespace troupe::catalog_steps {

// A label as an integer, or nothing.
inline std::optional<int64_t> integer_label(std::string_view text) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size())
    return std::nullopt;
  return v;
}

// A class label as written; libsvm's binary labels +1 and -1 read as 1
// and 0.
inline std::string_view class_text(data_format format, std::string_view text) {
  if (format == data_format::libsvm) {
    if (text == "+1")
      return "1";
    if (text == "-1")
      return "0";
  }
  return text;
}

// A regression target as written: a finite number, or nothing.
inline std::optional<float> target_value(std::string_view text) {
  float v = 0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin < end && *begin == '+')
    ++begin;
  auto [p, ec] = std::from_chars(begin, end, v);
  if (text.empty() || ec != std::errc() || p != end || !std::isfinite(v))
    return std::nullopt;
  return v;
}

// Per numeric CSV column, over the training set's first pass: the values
// present (their sum) and the empty cells (data.missing-values).
struct column_tally {
  std::vector<double> sum;
  std::vector<uint64_t> present, missing;
  void add(const float* values, size_t count);
  void merge(const column_tally& other);
};

// What one pass over a file finds before the classes are known.
struct file_scan {
  uint64_t records = 0;
  uint64_t bad_rows = 0; // records the reader refused (columns, numbers, finiteness)
  std::map<std::string, uint64_t> label_counts; // label as written -> records
  shape_t item_shape;
  key_layout keys; // where the keys lie (embedding models)
  bool holds_bytes = false;
  std::string label_column;
  std::vector<std::string> numeric_columns; // CSV: by name (or index), in order
  column_tally columns;                     // CSV, while what empty cells become is unknown
};

/// How a scan splits a plain text file (CSV, Criteo, libsvm): into at most
/// `ranges` pieces of at least `min_bytes`, each read on a thread of its
/// own. The default: the machine's hardware threads (at most 8), 32 MiB.
struct scan_split {
  unsigned ranges = 1;
  uint64_t min_bytes = 0;
};
scan_split default_scan_split();

/// What the training set's empty numeric cells become (data.missing-values,
/// data.missing-fill), from its first pass: into train.csv.fills, and the
/// scans' shapes widened by the indicators. Throws data_error for a
/// data.missing-fill that names no numeric column.
void resolve_missing_values(data_split& train, std::vector<file_scan>& scans);

/// Reads every record of `file` once: records, bad ones, labels as written.
/// Throws data_error for a bad record where the split's policy is fail. A
/// file split into ranges gives the same counts; where a range fails, the
/// whole file is read again in order, so that the error names the first
/// bad record as a single reader finds it.
file_scan scan_file(const data_split& split, const data_file& file,
                    const scan_split& how = default_scan_split());

// Counts bad labels (no class) per file from the scans; with fail, names
// the first.
void apply_classes(std::shared_ptr<data_split> split, const std::vector<file_scan>& scans);

// Classes and their names from the training set's labels.
void find_classes(data_split& split, const data_options& options,
                  const std::vector<file_scan>& scans);

// The normalizer data.normalize asks for `train`; `first`: its first
// file's scan. auto scales a file of bytes (IDX, .npy) to [0, 1] and
// standardizes a CSV set's numeric values: columns of counts, money and
// 0/1 flags side by side train badly as they are.
normalizer make_normalizer(const data_options& options, const data_split& train,
                           const file_scan& first);

// Per-feature mean and standard deviation over the usable training records
// (a constant feature keeps stddev 1: it is only centred).
void compute_statistics(std::shared_ptr<data_split> split);

} // namespace troupe::catalog_steps
