#include "tensor/data/catalog.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include <glob.h>
#include <sys/stat.h>

namespace troupe {

namespace {

constexpr size_t max_distinct_labels = 65536;

bool has_glob_characters(const std::string& s) {
  return s.find_first_of("*?[") != std::string::npos;
}

std::optional<int64_t> integer_label(std::string_view text) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size())
    return std::nullopt;
  return v;
}

// A regression target as written: a finite number, or nothing.
std::optional<float> target_value(std::string_view text) {
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

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// What one pass over a file finds before the classes are known.
struct file_scan {
  uint64_t records = 0;
  uint64_t bad_rows = 0; // records the reader refused (columns, numbers, finiteness)
  std::map<std::string, uint64_t> label_counts; // label as written -> records
  shape_t item_shape;
  bool holds_bytes = false;
  std::string label_column;
};

file_scan scan_file(const data_split& split, const data_file& file) {
  auto reader = open_records(split.format, file.features, file.labels, split.csv);
  file_scan out;
  out.item_shape = reader->item_shape();
  out.holds_bytes = reader->holds_bytes();
  out.label_column = reader->label_name();
  raw_record record;
  for (;;) {
    try {
      if (!reader->next(record))
        break;
    } catch (const bad_record& e) {
      ++out.records;
      ++out.bad_rows;
      if (split.bad_records == bad_record_policy::fail)
        throw data_error(std::string(e.what())
                         + " (data.bad-records = skip passes over such records)");
      continue;
    }
    ++out.records;
    if (split.task == objective::regression) {
      if (target_value(record.label_text))
        continue;
      ++out.bad_rows;
      if (split.bad_records == bad_record_policy::fail)
        throw data_error(reader->where() + ": target '" + std::string(record.label_text)
                         + "' is not a finite number (data.bad-records = skip passes over such "
                           "records)");
      continue;
    }
    auto text = split.format == data_format::csv ? std::string(record.label_text)
                                                 : std::to_string(record.label);
    auto it = out.label_counts.find(text);
    if (it != out.label_counts.end()) {
      ++it->second;
    } else {
      if (out.label_counts.size() >= max_distinct_labels)
        throw data_error(file.features + ": more than " + std::to_string(max_distinct_labels)
                         + " distinct labels; is data.label-column the label?");
      out.label_counts.emplace(std::move(text), 1);
    }
  }
  if (out.records == 0)
    throw data_error(file.features + ": holds no records (an empty file?)");
  return out;
}

// The class of a label as written, or -1 where it has none.
int64_t class_of(const data_split& split, const std::string& text) {
  if (!split.label_names.empty()) {
    auto it = std::find(split.label_names.begin(), split.label_names.end(), text);
    return it == split.label_names.end() ? -1 : it - split.label_names.begin();
  }
  auto v = integer_label(text);
  return v && *v >= 0 && *v < split.classes ? *v : -1;
}

// Finds the first record whose label has no class, to name it.
[[noreturn]] void refuse_first_bad_label(std::shared_ptr<const data_split> split, size_t file) {
  example_source source(split, file);
  std::vector<float> features(static_cast<size_t>(split->features()));
  int32_t label;
  float target;
  while (source.next(features.data(), label, target)) {
  }
  throw data_error(split->files[file].features + ": a label has no class");
}

void check_item_shapes(const data_split& split, const std::vector<file_scan>& scans) {
  for (size_t i = 1; i < scans.size(); ++i)
    if (num_elements(scans[i].item_shape) != num_elements(scans[0].item_shape))
      throw data_error(split.files[i].features + ": examples of shape "
                       + to_string(scans[i].item_shape) + ", but " + split.files[0].features
                       + " holds examples of shape " + to_string(scans[0].item_shape));
}

data_split new_split(const std::string& name, data_format format, const data_options& options,
                     const std::vector<std::string>& features,
                     const std::vector<std::string>& labels, const char* key) {
  data_split split;
  split.name = name;
  split.format = format;
  split.csv = options.csv;
  split.bad_records = options.bad_records;
  split.task = options.task;
  if (split.task == objective::regression && format != data_format::csv)
    throw data_error("data.task = regression reads its target from a CSV column; "
                     + std::string(key) + " is " + name_of(format));
  if (format != data_format::csv && labels.size() != features.size())
    throw data_error(std::string(key) + ": " + std::to_string(features.size())
                     + " features files but " + std::to_string(labels.size())
                     + " labels files; IDX and .npy need one labels file per features file (" + key
                     + "-labels)");
  for (size_t i = 0; i < features.size(); ++i) {
    if (format_of_name(features[i]) != format && options.format.empty())
      throw data_error(features[i] + ": not a " + name_of(format)
                       + " file like the first of the set; set data.format where the names "
                         "do not tell");
    split.files.push_back({features[i], format == data_format::csv ? "" : labels[i], 0, 0});
  }
  return split;
}

// Counts bad labels (no class) per file from the scans; with fail, names
// the first.
void apply_classes(std::shared_ptr<data_split> split, const std::vector<file_scan>& scans) {
  for (size_t f = 0; f < scans.size(); ++f) {
    uint64_t bad_labels = 0;
    for (auto& [text, count] : scans[f].label_counts)
      if (class_of(*split, text) < 0)
        bad_labels += count;
    split->files[f].records = scans[f].records;
    split->files[f].bad = scans[f].bad_rows + bad_labels;
    if (bad_labels > 0 && split->bad_records == bad_record_policy::fail)
      refuse_first_bad_label(split, f);
  }
  if (split->usable_records() == 0)
    throw data_error(split->name + ": every record is bad; nothing to train or evaluate on");
}

shape_t item_shape_of(const data_options& options, const file_scan& scan, const std::string& file) {
  auto shape = scan.item_shape;
  if (shape.size() == 2)
    shape.push_back(1); // [H, W] images have one channel
  if (options.input_shape.empty())
    return shape;
  if (num_elements(options.input_shape) != num_elements(shape))
    throw data_error("data.input-shape = " + to_string(options.input_shape) + " holds "
                     + std::to_string(num_elements(options.input_shape)) + " values, but " + file
                     + " holds examples of shape " + to_string(scan.item_shape) + " ("
                     + std::to_string(num_elements(shape)) + " values)");
  return options.input_shape;
}

// Classes taken from integer labels are 0..largest: one that no training
// label names would be a class the model learns never to predict (61 stray
// labels of 200 made a 201-class model). Refused, naming the first missing
// ones, unless data.classes says how many classes there are.
void refuse_missing_classes(const data_split& split, const std::map<std::string, uint64_t>& all,
                            int64_t largest) {
  std::vector<bool> seen(static_cast<size_t>(largest + 1), false);
  for (auto& [text, count] : all)
    if (auto v = integer_label(text); v && *v >= 0)
      seen[static_cast<size_t>(*v)] = true;
  std::vector<int64_t> missing;
  for (int64_t c = 0; c <= largest; ++c)
    if (!seen[static_cast<size_t>(c)])
      missing.push_back(c);
  if (missing.empty())
    return;
  std::string names;
  for (size_t i = 0; i < missing.size() && i < 8; ++i)
    names += (i ? ", " : "") + std::to_string(missing[i]);
  if (missing.size() > 8)
    names += ", ... (" + std::to_string(missing.size()) + " in all)";
  std::string rare; // the labels beyond the gap, with their counts: the likely strays
  for (auto& [text, count] : all)
    if (auto v = integer_label(text); v && *v > missing.front())
      rare += (rare.empty() ? "" : ", ") + text + " (" + std::to_string(count) + " records)";
  throw data_error(split.name + ": the labels run 0.." + std::to_string(largest)
                   + " but no record has class " + names + "; labels above the gap: "
                   + (rare.size() > 200 ? rare.substr(0, 200) + "..." : rare)
                   + ". Fix the stray labels, or set data.classes = " + std::to_string(largest + 1)
                   + " if the classes are meant");
}

// Classes and their names from the training set's labels.
void find_classes(data_split& split, const data_options& options,
                  const std::vector<file_scan>& scans) {
  if (split.task == objective::regression) {
    if (!options.label_names.empty() || options.classes > 1)
      throw data_error("data.task = regression has one real target: data.label-names and "
                       "data.classes do not apply");
    split.classes = 1;
    return;
  }
  std::map<std::string, uint64_t> all;
  for (auto& scan : scans)
    for (auto& [text, count] : scan.label_counts)
      all[text] += count;
  if (!options.label_names.empty()) {
    split.label_names = options.label_names;
    split.classes = static_cast<int64_t>(options.label_names.size());
    if (options.classes > 0 && options.classes != split.classes)
      throw data_error("data.classes = " + std::to_string(options.classes)
                       + " but data.label-names names " + std::to_string(split.classes)
                       + " classes");
    return;
  }
  int64_t largest = -1;
  bool integers = true;
  for (auto& [text, count] : all) {
    auto v = integer_label(text);
    if (!v) {
      integers = false;
      break;
    }
    largest = std::max(largest, *v);
  }
  if (integers) {
    if (options.classes == 0 && largest >= data_limits::max_classes)
      throw data_error(split.name + ": the largest label is " + std::to_string(largest)
                       + ", more than " + std::to_string(data_limits::max_classes)
                       + " classes; is data.label-column the label? (data.classes bounds "
                         "them; larger labels are then bad records)");
    split.classes = options.classes > 0 ? options.classes : largest + 1;
    if (split.classes < 2)
      throw data_error(split.name + ": every label is " + std::to_string(largest)
                       + "; classification needs at least two classes (set data.classes)");
    if (options.classes == 0)
      refuse_missing_classes(split, all, largest);
    return;
  }
  if (split.format != data_format::csv)
    throw data_error(split.name + ": labels that are not integers");
  for (auto& [text, count] : all)
    split.label_names.push_back(text); // std::map: sorted, the same on every node
  split.classes = static_cast<int64_t>(split.label_names.size());
  if (options.classes > 0 && options.classes != split.classes)
    throw data_error("data.classes = " + std::to_string(options.classes)
                     + " but the training set's labels name " + std::to_string(split.classes)
                     + " classes");
}

normalizer make_normalizer(const data_options& options, const file_scan& first, int64_t features) {
  normalizer out;
  switch (options.normalize) {
    case normalization::automatic:
      if (first.holds_bytes) {
        out.kind = normalization::scale;
        out.scale = 1.0f / 255.0f;
      }
      break;
    case normalization::none:
      break;
    case normalization::scale:
      out.kind = normalization::scale;
      out.scale = static_cast<float>(options.scale);
      break;
    case normalization::standardize:
      out.kind = normalization::standardize;
      if (!options.mean.empty()) {
        if (static_cast<int64_t>(options.mean.size()) != features
            || static_cast<int64_t>(options.stddev.size()) != features)
          throw data_error("data.mean and data.stddev need " + std::to_string(features)
                           + " values each (one per feature); they have "
                           + std::to_string(options.mean.size()) + " and "
                           + std::to_string(options.stddev.size()));
        for (int64_t i = 0; i < features; ++i) {
          out.mean.push_back(static_cast<float>(options.mean[i]));
          out.inv_stddev.push_back(
            options.stddev[i] > 0 ? static_cast<float>(1.0 / options.stddev[i]) : 1.0f);
        }
      }
      break;
  }
  return out;
}

// Per-feature mean and standard deviation over the usable training records
// (a constant feature keeps stddev 1: it is only centred).
void compute_statistics(std::shared_ptr<data_split> split) {
  auto features = static_cast<size_t>(split->features());
  std::vector<double> sum(features, 0.0), sum_sq(features, 0.0);
  std::vector<float> x(features);
  uint64_t n = 0;
  auto raw = std::make_shared<data_split>(*split);
  raw->norm = normalizer{}; // the statistics are of the raw values
  for (size_t f = 0; f < raw->files.size(); ++f) {
    example_source source(raw, f);
    int32_t label;
    float target;
    while (source.next(x.data(), label, target)) {
      ++n;
      for (size_t i = 0; i < features; ++i) {
        sum[i] += x[i];
        sum_sq[i] += double{x[i]} * x[i];
      }
    }
  }
  split->norm.mean.resize(features);
  split->norm.inv_stddev.resize(features);
  for (size_t i = 0; i < features; ++i) {
    double mean = sum[i] / static_cast<double>(n);
    double var = std::max(0.0, sum_sq[i] / static_cast<double>(n) - mean * mean);
    double sd = std::sqrt(var);
    split->norm.mean[i] = static_cast<float>(mean);
    split->norm.inv_stddev[i] = sd > 1e-12 ? static_cast<float>(1.0 / sd) : 1.0f;
  }
}

std::shared_ptr<const data_split> catalog_split(std::shared_ptr<data_split> split,
                                                const data_split* train) {
  std::vector<file_scan> scans;
  for (auto& file : split->files)
    scans.push_back(scan_file(*split, file));
  check_item_shapes(*split, scans);
  if (train) {
    if (num_elements(scans[0].item_shape) != train->features())
      throw data_error(split->files[0].features + ": examples of shape "
                       + to_string(scans[0].item_shape) + ", but the training set's are "
                       + to_string(train->item_shape));
    split->item_shape = train->item_shape;
    split->task = train->task;
    split->classes = train->classes;
    split->label_names = train->label_names;
    split->norm = train->norm;
  }
  apply_classes(split, scans);
  return split;
}

} // namespace

std::vector<std::string> data_option_problems(const data_options& o) {
  std::vector<std::string> out;
  if (!o.format.empty() && !enum_from_name<data_format>(o.format))
    out.push_back("data.format = '" + o.format + "' is not one of " + name_list<data_format>());
  if (o.train.empty() && (!o.test.empty() || !o.validation.empty() || !o.train_labels.empty()))
    out.push_back("data.train is missing: a [data] section with test or validation files needs "
                  "the training files too");
  if (!o.train.empty() && o.test.empty())
    out.push_back("data.test is missing: give the test set's files (the chief evaluates on it)");
  if (o.csv.label_column.empty())
    out.push_back("data.label-column is empty: name the label's column, or give its 0-based "
                  "index as text (\"0\")");
  if (o.shuffle_buffer < 0 || o.shuffle_buffer > data_limits::max_shuffle_buffer)
    out.push_back("data.shuffle-buffer = " + std::to_string(o.shuffle_buffer) + " is outside 0.."
                  + std::to_string(data_limits::max_shuffle_buffer)
                  + " (0: the whole share when it takes at most 256 MiB)");
  if (o.prefetch < 0 || o.prefetch > data_limits::max_prefetch)
    out.push_back("data.prefetch = " + std::to_string(o.prefetch) + " is outside 0.."
                  + std::to_string(data_limits::max_prefetch));
  if (o.classes < 0 || o.classes > data_limits::max_classes || o.classes == 1)
    out.push_back("data.classes = " + std::to_string(o.classes) + " is outside 2.."
                  + std::to_string(data_limits::max_classes) + " (0: from the labels)");
  if (o.label_names.size() > static_cast<size_t>(data_limits::max_classes))
    out.push_back("data.label-names names more than " + std::to_string(data_limits::max_classes)
                  + " classes");
  if (!(o.scale > 0 && std::isfinite(o.scale)))
    out.push_back("data.scale must be a positive number");
  if (o.normalize != normalization::scale && o.scale != 1.0)
    out.push_back("data.scale is set, but data.normalize is not 'scale'");
  if (o.mean.size() != o.stddev.size())
    out.push_back("data.mean and data.stddev differ in length");
  if (!o.mean.empty() && o.normalize != normalization::standardize)
    out.push_back("data.mean / data.stddev are set, but data.normalize is not 'standardize'");
  for (double v : o.mean)
    if (!std::isfinite(v))
      out.push_back("data.mean holds a value that is not finite");
  for (double v : o.stddev)
    if (!(v >= 0 && std::isfinite(v)))
      out.push_back("data.stddev holds a value that is negative or not finite");
  for (auto d : o.input_shape)
    if (d < 1 || d > 65536)
      out.push_back("data.input-shape = " + to_string(o.input_shape)
                    + ": every dimension must be in 1..65536");
  if (o.input_shape.size() > 3)
    out.push_back("data.input-shape = " + to_string(o.input_shape) + ": rank 1 to 3");
  return out;
}

void normalizer::apply(float* x, size_t count) const {
  switch (kind) {
    case normalization::scale:
      for (size_t i = 0; i < count; ++i)
        x[i] *= scale;
      break;
    case normalization::standardize:
      for (size_t i = 0; i < count; ++i)
        x[i] = (x[i] - mean[i]) * inv_stddev[i];
      break;
    default:
      break;
  }
}

std::string normalizer::describe() const {
  switch (kind) {
    case normalization::scale:
      return "scale " + std::to_string(scale);
    case normalization::standardize:
      return "standardize (" + std::to_string(mean.size()) + " features)";
    default:
      return "none";
  }
}

uint64_t data_split::usable_records() const {
  if (memory)
    return memory->size();
  uint64_t n = 0;
  for (auto& f : files)
    n += f.records - f.bad;
  return n;
}

uint64_t data_split::bad_records_total() const {
  uint64_t n = 0;
  for (auto& f : files)
    n += f.bad;
  return n;
}

std::shared_ptr<const data_split> split_in_memory(std::shared_ptr<const dataset> data,
                                                  const std::string& name, int64_t classes) {
  auto split = std::make_shared<data_split>();
  split->name = name;
  split->item_shape = {data->features()};
  split->classes = classes;
  if (!data->targets.empty())
    split->task = objective::regression;
  split->files.push_back({"(memory)", "", data->size(), 0});
  split->memory = std::move(data);
  return split;
}

// Data files are read whole, more than once (the catalog's pass, then each
// worker's): a FIFO would block the task and a directory or device is no
// data. Anything but a regular file is refused by name.
void require_regular_file(const std::string& path, const char* key) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    return; // the reader names a missing file, as before
  if (S_ISREG(info.st_mode))
    return;
  const char* what = S_ISDIR(info.st_mode)    ? "a directory"
                     : S_ISFIFO(info.st_mode) ? "a FIFO (named pipe)"
                     : S_ISSOCK(info.st_mode) ? "a socket"
                                              : "a device";
  throw data_error(std::string(key) + ": '" + path + "' is " + what
                   + ", not a regular file; data files are read whole, more than once: give "
                     "files (a glob such as 'dir/*.csv' names a directory's)");
}

std::vector<std::string> expand_paths(const std::vector<std::string>& patterns, const char* key) {
  std::vector<std::string> out;
  for (auto& pattern : patterns) {
    if (!has_glob_characters(pattern)) {
      require_regular_file(pattern, key);
      out.push_back(pattern);
      continue;
    }
    glob_t found{};
    int rc = glob(pattern.c_str(), 0, nullptr, &found);
    if (rc != 0 || found.gl_pathc == 0) {
      globfree(&found);
      throw data_error(std::string(key) + ": '" + pattern + "' matches no file");
    }
    auto first = out.size();
    for (size_t i = 0; i < found.gl_pathc; ++i)
      out.emplace_back(found.gl_pathv[i]); // glob sorts
    globfree(&found);
    for (auto i = first; i < out.size(); ++i)
      require_regular_file(out[i], key);
    if (out.size() > data_limits::max_files)
      throw data_error(std::string(key) + ": more than " + std::to_string(data_limits::max_files)
                       + " files");
  }
  return out;
}

data_catalog catalog_data(const data_options& options, const std::string& fashion_mnist_dir) {
  auto problems = data_option_problems(options);
  if (!problems.empty())
    throw data_error(problems.front());
  data_options o = options;
  if (o.train.empty()) {
    o.train = {fashion_mnist_dir + "/train-images-idx3-ubyte.gz"};
    o.train_labels = {fashion_mnist_dir + "/train-labels-idx1-ubyte.gz"};
    o.test = {fashion_mnist_dir + "/t10k-images-idx3-ubyte.gz"};
    o.test_labels = {fashion_mnist_dir + "/t10k-labels-idx1-ubyte.gz"};
  }
  auto train_files = expand_paths(o.train, "data.train");
  auto format = o.format.empty() ? format_of_name(train_files.front())
                                 : *enum_from_name<data_format>(o.format);
  auto make = [&](const std::string& name, const std::vector<std::string>& features,
                  const std::vector<std::string>& labels, const char* key) {
    auto files = expand_paths(features, key);
    auto label_files = format == data_format::csv
                         ? std::vector<std::string>{}
                         : expand_paths(labels, (std::string(key) + "-labels").c_str());
    return std::make_shared<data_split>(new_split(name, format, o, files, label_files, key));
  };
  auto train = make("training set", o.train, o.train_labels, "data.train");

  std::vector<file_scan> scans;
  for (auto& file : train->files)
    scans.push_back(scan_file(*train, file));
  check_item_shapes(*train, scans);
  train->item_shape = item_shape_of(o, scans[0], train->files[0].features);
  find_classes(*train, o, scans);
  train->norm = make_normalizer(o, scans[0], train->features());
  apply_classes(train, scans);
  if (train->norm.kind == normalization::standardize && train->norm.mean.empty())
    compute_statistics(train);

  data_catalog out;
  out.train = train;
  out.test = catalog_split(make("test set", o.test, o.test_labels, "data.test"), train.get());
  if (!o.validation.empty())
    out.validation = catalog_split(
      make("validation set", o.validation, o.validation_labels, "data.validation"), train.get());
  return out;
}

example_source::example_source(std::shared_ptr<const data_split> split, size_t file)
  : split_(std::move(split)), file_(file) {
  if (!split_->memory) {
    auto& f = split_->files.at(file_);
    reader_ = open_records(split_->format, f.features, f.labels, split_->csv);
  }
}

void example_source::seek(uint64_t index) {
  position_ = index;
  if (reader_)
    reader_->seek(index);
}

bool example_source::map_label(int32_t& label, float& target) {
  if (!split_->labelled) {
    label = 0;
    target = 0;
    return true;
  }
  if (split_->task == objective::regression) {
    auto v = target_value(record_.label_text);
    label = 0;
    if (v)
      target = *v;
    return v.has_value();
  }
  int64_t c;
  if (split_->format == data_format::csv) {
    if (!split_->label_names.empty()) {
      auto& names = split_->label_names;
      auto it = std::find(names.begin(), names.end(), record_.label_text);
      c = it == names.end() ? -1 : it - names.begin();
    } else {
      auto v = integer_label(record_.label_text);
      c = v ? *v : -1;
    }
  } else {
    c = record_.label;
  }
  if (c < 0 || c >= split_->classes)
    return false;
  label = static_cast<int32_t>(c);
  return true;
}

bool example_source::next(float* features, int32_t& label, float& target) {
  auto n = static_cast<size_t>(split_->features());
  if (split_->memory) {
    auto& data = *split_->memory;
    if (position_ >= data.size())
      return false;
    std::copy_n(data.images.data() + position_ * n, n, features);
    if (!data.targets.empty())
      target = data.targets[position_];
    label = data.labels[position_++];
    return true;
  }
  for (;;) {
    std::string problem;
    try {
      if (!reader_->next(record_))
        return false;
      ++position_;
      if (!map_label(label, target)) {
        problem = split_->task == objective::regression
                    ? reader_->where() + ": target '" + std::string(record_.label_text)
                        + "' is not a finite number"
                    : reader_->where() + ": label '"
                        + (split_->format == data_format::csv ? std::string(record_.label_text)
                                                              : std::to_string(record_.label))
                        + "' is not one of the " + std::to_string(split_->classes) + " classes ("
                        + (split_->label_names.empty()
                             ? "0.." + std::to_string(split_->classes - 1)
                             : "named in the training set or data.label-names")
                        + ")";
      }
    } catch (const bad_record& e) {
      ++position_;
      problem = e.what();
    }
    if (problem.empty())
      break;
    if (split_->bad_records == bad_record_policy::fail)
      throw data_error(problem + " (data.bad-records = skip passes over such records)");
    ++skipped_;
  }
  std::copy(record_.features.begin(), record_.features.end(), features);
  if (split_->norm.kind == normalization::none)
    return true;
  split_->norm.apply(features, n);
  if (std::all_of(features, features + n, [](float v) { return std::isfinite(v); }))
    return true;
  // A value so large that normalising it overflows.
  auto problem = reader_->where() + ": a feature is not finite after normalisation ("
                 + split_->norm.describe() + ")";
  if (split_->bad_records == bad_record_policy::fail)
    throw data_error(problem + " (data.bad-records = skip passes over such records)");
  ++skipped_;
  return next(features, label, target);
}

dataset load_all(std::shared_ptr<const data_split> split) {
  if (split->memory)
    return *split->memory;
  dataset out;
  auto n = split->features();
  auto total = split->usable_records();
  out.images = tensor({static_cast<int64_t>(total), n});
  out.labels.reserve(total);
  size_t row = 0;
  for (size_t f = 0; f < split->files.size(); ++f) {
    example_source source(split, f);
    int32_t label;
    float target = 0;
    while (row < total && source.next(out.images.data() + row * n, label, target)) {
      out.labels.push_back(label);
      if (split->task == objective::regression)
        out.targets.push_back(target);
      ++row;
    }
  }
  if (row != total)
    throw data_error(split->name + ": " + std::to_string(row) + " usable records read, but "
                     + std::to_string(total)
                     + " counted: a file changed during the run, or features overflow once "
                       "normalised ("
                     + split->norm.describe() + ")");
  return out;
}

namespace {

std::string catalog_json(const data_catalog& catalog, bool brief) {
  auto split_json = [brief](const data_split& s) {
    std::string files;
    for (auto& f : s.files)
      if (!brief || f.bad > 0)
        files += std::string(files.empty() ? "" : ",") + "{\"path\":" + json_string(f.features)
                 + ",\"records\":" + std::to_string(f.records)
                 + ",\"bad_records\":" + std::to_string(f.bad) + "}";
    return "{\"records\":" + std::to_string(s.usable_records()) + ",\"bad_records\":"
           + std::to_string(s.bad_records_total()) + ",\"files\":[" + files + "]}";
  };
  auto& t = *catalog.train;
  std::string shape;
  for (auto d : t.item_shape)
    shape += (shape.empty() ? "" : ",") + std::to_string(d);
  std::string names;
  for (auto& n : t.label_names)
    names += (names.empty() ? "" : ",") + json_string(n);
  std::string out = "{\"format\":\"" + std::string(name_of(t.format)) + "\",\"task\":\""
                    + name_of(t.task) + "\",\"input_shape\":[" + shape
                    + "],\"classes\":" + std::to_string(t.classes) + ",\"label_names\":[" + names
                    + "],\"normalize\":{\"kind\":\""
                    + name_of(t.norm.kind == normalization::automatic ? normalization::none
                                                                      : t.norm.kind)
                    + "\"";
  char buf[32];
  if (t.norm.kind == normalization::scale) {
    std::snprintf(buf, sizeof buf, "%.9g", double{t.norm.scale});
    out += ",\"scale\":" + std::string(buf);
  }
  if (t.norm.kind == normalization::standardize && !brief) {
    std::string mean, sd;
    for (size_t i = 0; i < t.norm.mean.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%.9g", double{t.norm.mean[i]});
      mean += (i ? "," : "") + std::string(buf);
      std::snprintf(buf, sizeof buf, "%.9g", 1.0 / double{t.norm.inv_stddev[i]});
      sd += (i ? "," : "") + std::string(buf);
    }
    out += ",\"mean\":[" + mean + "],\"stddev\":[" + sd + "]";
  }
  out += "},\"train\":" + split_json(t) + ",\"test\":" + split_json(*catalog.test);
  if (catalog.validation)
    out += ",\"validation\":" + split_json(*catalog.validation);
  return out + "}";
}

} // namespace

std::string describe_json(const data_catalog& catalog) {
  return catalog_json(catalog, false);
}

std::string data_summary_json(const data_catalog& catalog) {
  return catalog_json(catalog, true);
}

std::vector<std::string> describe_lines(const data_catalog& catalog) {
  std::vector<std::string> out;
  auto& t = *catalog.train;
  out.push_back(std::string(name_of(t.format)) + " data: examples of shape "
                + to_string(t.item_shape) + ", "
                + (t.task == objective::regression ? std::string("a real target (regression)")
                                                   : std::to_string(t.classes) + " classes")
                + ", normalisation " + t.norm.describe());
  for (auto* s : {catalog.train.get(), catalog.test.get(), catalog.validation.get()}) {
    if (!s)
      continue;
    out.push_back(s->name + ": " + std::to_string(s->usable_records()) + " examples in "
                  + std::to_string(s->files.size()) + " file(s)"
                  + (s->bad_records_total()
                       ? ", " + std::to_string(s->bad_records_total()) + " bad records skipped"
                       : std::string()));
    for (auto& f : s->files)
      if (f.bad > 0)
        out.push_back("  " + f.features + ": " + std::to_string(f.bad) + " of "
                      + std::to_string(f.records) + " records skipped (bad)");
  }
  if (!t.label_names.empty()) {
    std::string classes = "classes:";
    for (size_t i = 0; i < t.label_names.size() && i < 100; ++i)
      classes += " " + std::to_string(i) + "=" + t.label_names[i];
    if (t.label_names.size() > 100)
      classes += " ...";
    out.push_back(classes);
  }
  return out;
}

} // namespace troupe
