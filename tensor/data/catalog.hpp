#pragma once
// The data of a run: the [data] section typed (data_options), and what one
// pass over the files finds (a data_split per set): how many records each
// file holds and how many of them are bad, one example's shape, the classes
// and what their labels are called, and the normalisation. Every node builds
// the same catalog from the same files, so they agree on all of it without a
// message; workers then stream their share (stream.hpp).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/core/enum_names.hpp"
#include "tensor/data/dataset.hpp"
#include "tensor/data/formats.hpp"

namespace troupe {

/// What happens to a record that cannot be trained on (data.bad-records).
enum class bad_record_policy { fail, skip };

TROUPE_ENUM_NAMES(bad_record_policy, {bad_record_policy::fail, "fail"},
                  {bad_record_policy::skip, "skip"});

/// How features are transformed before training and evaluation
/// (data.normalize). automatic: uint8 files (IDX, .npy) are scaled to [0, 1],
/// anything else is left as it is.
enum class normalization { automatic, none, scale, standardize };

TROUPE_ENUM_NAMES(normalization, {normalization::automatic, "auto"}, {normalization::none, "none"},
                  {normalization::scale, "scale"}, {normalization::standardize, "standardize"});

/// data.eval-memory-bytes by default: 256 MiB.
constexpr int64_t default_eval_memory_bytes = int64_t{256} << 20;

/// The [data] section (docs/config.md). Paths may be globs; a list's files
/// are taken in the order given, a glob's in sorted order.
struct data_options {
  /// Empty: Fashion-MNIST from the training settings' data directory.
  std::vector<std::string> train, test, validation;
  /// IDX and .npy keep labels in their own files: one per features file.
  std::vector<std::string> train_labels, test_labels, validation_labels;
  /// Empty: from the first file's name (format_of_name).
  std::string format;
  csv_layout csv;
  /// The class names, in class order (CSV labels written as names); empty:
  /// integer labels are classes, other labels are named classes sorted.
  std::vector<std::string> label_names;
  /// 0: one more than the largest label (or the number of names).
  int64_t classes = 0;
  /// Empty: the files' item shape ([H, W] becomes [H, W, 1]; CSV: [features]).
  shape_t input_shape;
  normalization normalize = normalization::automatic;
  double scale = 1.0;
  /// standardize: per-feature mean and standard deviation; empty: computed
  /// over the training set.
  std::vector<double> mean, stddev;
  bad_record_policy bad_records = bad_record_policy::fail;
  /// regression: the label column (CSV) holds a real target, not a class.
  objective task = objective::classification;
  /// Examples a worker holds to shuffle from (tf.data's shuffle buffer); a
  /// share that fits is kept in memory. 0: the whole share when it takes at
  /// most 256 MiB, else 10000 (stream.hpp).
  int64_t shuffle_buffer = 0;
  /// Batches a worker's reader thread prepares ahead of compute (0: none).
  int64_t prefetch = 4;
  /// The evaluation set is read once and kept when its examples take at
  /// most this many bytes, else read from its files at each evaluation
  /// (evaluation_set.hpp). 0: always from the files.
  int64_t eval_memory_bytes = default_eval_memory_bytes;
  /// data.follow: `train` names one directory, whose files are read as
  /// they appear (follow_reader.hpp), without end; the shape, classes and
  /// normalisation come from `test`.
  bool follow = false;
};

/// The limits on the [data] values (checked by check_data_options).
namespace data_limits {
constexpr int64_t max_shuffle_buffer = int64_t{1} << 24;
constexpr int64_t max_prefetch = 1024;
constexpr int64_t max_eval_memory_bytes = int64_t{1} << 40;
constexpr int64_t max_classes = 65536;
constexpr size_t max_files = 100000;
constexpr int64_t max_keys = 4096;   ///< libsvm key slots per example
constexpr int64_t max_fields = 8191; ///< categorical columns (field_key's limit)
} // namespace data_limits

/// Every problem with the options themselves (not the files), each naming
/// the data.* key.
std::vector<std::string> data_option_problems(const data_options& options);

/// How features are transformed: x * scale, or (x - mean) / stddev per feature.
struct normalizer {
  normalization kind = normalization::none;
  float scale = 1.0f;
  std::vector<float> mean, inv_stddev;
  void apply(float* features, size_t count) const;
  /// One line for logs: "scale 0.00392157", "standardize (784 features)".
  std::string describe() const;
};

/// One file of a set and what the catalog found in it.
struct data_file {
  std::string features, labels; ///< labels: IDX and .npy only
  uint64_t records = 0;         ///< records it holds, bad ones included
  uint64_t bad = 0;             ///< records data.bad-records = skip passes over
};

/// One set (training, test or validation) as every node sees it.
struct data_split {
  std::string name; ///< "training set", for messages
  data_format format = data_format::idx;
  csv_layout csv;
  std::vector<data_file> files;
  shape_t item_shape;
  /// Where an example's keys lie (embedding models); no fields: dense data.
  key_layout keys;
  int64_t classes = 0;
  /// Class i's name where labels are names; empty where they are integers.
  std::vector<std::string> label_names;
  normalizer norm;
  bad_record_policy bad_records = bad_record_policy::fail;
  objective task = objective::classification; ///< regression: classes is 1
  /// false: the files hold no labels (inputs to predict on); every label
  /// reads 0, every target 0.
  bool labelled = true;
  /// An in-memory set (the library API, tests): no files, no normalisation.
  std::shared_ptr<const dataset> memory;
  /// data.follow: the directory whose files are read as they appear
  /// (`files` is empty: they are not known in advance).
  std::string follow;

  int64_t features() const { return num_elements(item_shape); }
  /// The values normalisation applies to: all, or those before the keys.
  int64_t dense_features() const { return keys.sparse() ? keys.dense : features(); }
  /// Records training can use (bad ones not counted).
  uint64_t usable_records() const;
  uint64_t bad_records_total() const;
};

/// A set held in memory, as a split (the library API's datasets).
std::shared_ptr<const data_split> split_in_memory(std::shared_ptr<const dataset> data,
                                                  const std::string& name, int64_t classes = 0);

struct data_catalog {
  std::shared_ptr<const data_split> train, test, validation; ///< validation may be null
  /// The set the chief evaluates on: validation where given, else test.
  std::shared_ptr<const data_split> evaluation() const { return validation ? validation : test; }
};

/// Reads every file once: counts and checks its records, finds the classes
/// and (for standardize) the statistics. Throws data_error naming the file
/// and record for a bad one under data.bad-records = fail, a glob that
/// matches nothing, an empty or truncated file, files that disagree.
/// `fashion_mnist_dir`: where the default sets lie when options.train is empty.
data_catalog catalog_data(const data_options& options, const std::string& fashion_mnist_dir);

/// The files a list of paths and globs names, in order; throws data_error
/// for a glob that matches nothing.
std::vector<std::string> expand_paths(const std::vector<std::string>& patterns, const char* key);

/// One file of a split, read example by example: bad records skipped (and
/// counted) or refused per the split's policy, labels mapped to classes,
/// features normalised.
class example_source {
public:
  example_source(std::shared_ptr<const data_split> split, size_t file);
  /// The next usable example into `features` (features() floats) and
  /// `label` (classification) or `target` (regression); false at the end of
  /// the file. Throws data_error naming the record where the policy is fail.
  bool next(float* features, int32_t& label, float& target);
  /// Continues at raw record `index` of the file.
  void seek(uint64_t index);
  /// Raw records read so far (bad ones included), from the file's start.
  uint64_t position() const noexcept { return position_; }
  uint64_t skipped() const noexcept { return skipped_; }

private:
  bool map_label(int32_t& label, float& target);

  std::shared_ptr<const data_split> split_;
  size_t file_;
  std::unique_ptr<record_reader> reader_;
  raw_record record_;
  uint64_t position_ = 0;
  uint64_t skipped_ = 0;
};

/// Every usable example of a split in memory (the chief's evaluation set).
dataset load_all(std::shared_ptr<const data_split> split);

/// A JSON object describing what the data became: files, records, bad
/// records per file, shape, classes and their names, normalisation (with
/// the statistics). Saved with the run (data.json in the log directory), so
/// that evaluation and prediction transform examples the same way.
std::string describe_json(const data_catalog& catalog);

/// The same, brief, for the final line: no statistics, and only the files
/// with bad records.
std::string data_summary_json(const data_catalog& catalog);

/// Log lines: the sets, their records and bad records, the classes.
std::vector<std::string> describe_lines(const data_catalog& catalog);

} // namespace troupe
