#pragma once
// Readers of one data file each, record by record, in the formats users
// bring: IDX (MNIST-style; items of rank 1 to 3), CSV and NumPy .npy, each
// gzipped or not (zlib reads plain files transparently). A reader holds one
// record and a read buffer, never the file: memory does not grow with the
// data. What the values mean (labels, classes, normalisation) is catalog's.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/core/enum_names.hpp"
#include "tensor/core/error.hpp"
#include "tensor/core/tensor.hpp"
#include "tensor/data/key_layout.hpp"

namespace troupe {

/// criteo: Criteo's click logs (label, 13 integer fields, 26 categorical
/// ones, tab-separated); libsvm: "label index:value ...". Both are read into
/// key_layout rows for embedding models.
enum class data_format { idx, csv, npy, criteo, libsvm };

TROUPE_ENUM_NAMES(data_format, {data_format::idx, "idx"}, {data_format::csv, "csv"},
                  {data_format::npy, "npy"}, {data_format::criteo, "criteo"},
                  {data_format::libsvm, "libsvm"});

/// Whether records carry their labels as text (CSV, Criteo, libsvm), not in
/// a labels file of their own (IDX, .npy).
inline bool labels_in_text(data_format format) {
  return format != data_format::idx && format != data_format::npy;
}

/// The format a file name suggests: .csv(.gz) is CSV, .npy(.gz) NumPy,
/// .tsv(.gz) Criteo, .svm/.libsvm(.gz) libsvm, anything else IDX.
data_format format_of_name(const std::string& path);

/// A record the file holds but that cannot be trained on (a row with the
/// wrong number of columns, a value that is not a number, a label out of
/// range, ...): data.bad-records = skip passes over these. Anything else
/// wrong with a file (missing, truncated, wrong header) is a plain
/// data_error and ends the read.
struct bad_record : data_error {
  using data_error::data_error;
};

/// What an empty numeric CSV cell becomes (data.missing-values): the
/// column's mean over the training set, or 0, each with an indicator
/// feature (1 where the cell was empty) for a column that has empty cells
/// in the training set; or refused as a bad record.
enum class missing_values { mean, zero, refuse };

TROUPE_ENUM_NAMES(missing_values, {missing_values::mean, "mean"}, {missing_values::zero, "zero"},
                  {missing_values::refuse, "refuse"});

/// A column's own value for its empty cells (data.missing-fill, written
/// "column=value"; the column a name from the header or a 0-based index).
struct column_fill {
  std::string column;
  float value = 0;
};

/// Parses "column=value"; nullopt where it is not that or the value is not
/// a finite number.
std::optional<column_fill> parse_column_fill(const std::string& text);

/// What a CSV reader writes for an empty numeric cell, per numeric column
/// in file order. The catalog works it out from the training set (every set
/// of a run, and the model exported from it, reads the same); unknown (the
/// catalog's own first pass), an empty cell reads NaN unless refused.
struct missing_fills {
  std::vector<std::string> column; ///< the numeric columns' names (or indices)
  std::vector<float> value;        ///< NaN: refused, a bad record
  std::vector<uint8_t> indicator;  ///< 1: the column has an indicator feature
  bool known() const { return !value.empty(); }
  int64_t indicators() const;
};

/// How CSV files are laid out.
struct csv_layout {
  char delimiter = ',';
  bool header = true;
  /// The label's column: a name from the header, or a 0-based index; empty:
  /// none (inputs to predict on).
  std::string label_column = "label";
  /// Columns that are neither feature nor label (names or indices).
  std::vector<std::string> ignore_columns;
  /// Columns whose values are categories (ids or any strings), each one
  /// field of keys for an embedding table (key_layout), in this order.
  std::vector<std::string> categorical_columns;
  /// libsvm: key slots per example; a longer line is a bad record.
  int64_t max_keys = 64;
  /// A fixed-size embedding table's rows per field (embedding.vocabulary):
  /// an integer id at or past its field's size is a bad record. Empty: any
  /// key (a hash table).
  std::vector<int64_t> vocabulary;
  /// Empty numeric cells: the policy for every numeric column, and the
  /// columns with a value of their own.
  missing_values missing = missing_values::mean;
  std::vector<column_fill> missing_fill;
  /// The policy worked out for this data (see missing_fills).
  missing_fills fills;
};

/// One example as the file holds it, before labels are mapped to classes
/// and features normalised.
struct raw_record {
  std::vector<float> features;
  int64_t label = 0;           ///< IDX, .npy
  std::string_view label_text; ///< CSV: the label field (valid until the next read)
};

/// The data of one split lies in files; each is read by one of these.
class record_reader {
public:
  virtual ~record_reader() = default;
  /// Reads the next record into `out`; false at the end of the file.
  /// Throws bad_record for a record that cannot be used (the reader is then
  /// at the following record), data_error when the file itself is wrong.
  virtual bool next(raw_record& out) = 0;
  /// Moves to record `index` (0-based; the first data row of a CSV file).
  virtual void seek(uint64_t index) = 0;
  /// Values per record.
  virtual int64_t features() const = 0;
  /// Where a record's keys lie among its values (no fields: a dense record).
  virtual key_layout keys() const { return {features(), 0, 0}; }
  /// One record's shape (IDX, .npy: from the header; CSV: [features]).
  virtual const shape_t& item_shape() const = 0;
  /// The records the file holds, where its header says (IDX, .npy); -1 for CSV.
  virtual int64_t declared_records() const = 0;
  /// "file.csv line 17", "x.npy record 3": where the last record read lies.
  virtual std::string where() const = 0;
  /// The label column's name (CSV with a header), else "".
  virtual std::string label_name() const { return {}; }
  /// CSV: the numeric columns, in order, by name (or index without a
  /// header); where an empty cell's value goes (missing_fills).
  virtual std::vector<std::string> numeric_columns() const { return {}; }
  /// The file stores bytes 0..255 (uint8 IDX, .npy): data.normalize = auto
  /// scales them to [0, 1].
  virtual bool holds_bytes() const { return false; }
  /// From here on, only the records whose lines start in bytes [begin, end)
  /// of the file (a line that starts before `begin` is the range before's),
  /// so that threads can each read a range of one file. False where the
  /// reader cannot: binary formats, gzipped files.
  virtual bool restrict_to(uint64_t /*begin*/, uint64_t /*end*/) { return false; }
};

/// The size of `path` where it is plain text (not gzipped), else -1.
int64_t plain_text_bytes(const std::string& path);

/// IDX: `features` holds the items (magic 0x0000TTDD: type TT, DD dims),
/// `labels` one integer per item (empty: none, every label reads 0). Both
/// are checked against each other.
std::unique_ptr<record_reader> open_idx(const std::string& features, const std::string& labels);

/// .npy: `features` of shape [N, ...] (float32, float64 or uint8), `labels`
/// integers of shape [N] (empty: none); little-endian, C order.
std::unique_ptr<record_reader> open_npy(const std::string& features, const std::string& labels);

/// CSV: every column other than the label's, the ignored and the
/// categorical ones is a numeric feature; an example holds the numeric
/// values, then an indicator per column that layout.fills marks, then the
/// categorical columns' keys.
std::unique_ptr<record_reader> open_csv(const std::string& path, const csv_layout& layout);

/// Criteo's TSV (sparse_lines.hpp): 13 dense values, each x written as
/// sign(x) log(1 + |x|), then 26 fields of one key. The label is 0 or 1.
std::unique_ptr<record_reader> open_criteo(const std::string& path, const csv_layout& layout);

/// libsvm: one field of up to layout.max_keys weighted keys (the indices,
/// ids as they are). A classification label -1 is class 0 (example_source),
/// so that +1/-1 files are binary.
std::unique_ptr<record_reader> open_libsvm(const std::string& path, const csv_layout& layout);

/// The reader for `format`; `labels` is unused for CSV, Criteo and libsvm.
std::unique_ptr<record_reader> open_records(data_format format, const std::string& features,
                                            const std::string& labels, const csv_layout& layout);

} // namespace troupe
