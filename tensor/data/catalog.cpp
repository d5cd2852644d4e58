#include "tensor/data/catalog.hpp"

#include <cmath>
#include <filesystem>

#include "tensor/core/json_writer.hpp"
#include "tensor/data/catalog_steps.hpp"

namespace troupe {

namespace {

using namespace catalog_steps;

void check_item_shapes(const data_split& split, const std::vector<file_scan>& scans) {
  for (size_t i = 1; i < scans.size(); ++i)
    if (num_elements(scans[i].item_shape) != num_elements(scans[0].item_shape))
      throw data_error(split.files[i].features + ": examples of shape "
                       + to_string(scans[i].item_shape) + ", but " + split.files[0].features
                       + " holds examples of shape " + to_string(scans[0].item_shape));
  for (size_t i = 1; i < scans.size(); ++i)
    if (scans[i].keys != scans[0].keys)
      throw data_error(split.files[i].features + ": its categorical columns differ from "
                       + split.files[0].features + "'s");
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
  if (split.task == objective::regression && !labels_in_text(format))
    throw data_error("data.task = regression reads its target from a CSV column (or a Criteo "
                     "or libsvm label); "
                     + std::string(key) + " is " + name_of(format));
  if (!labels_in_text(format) && labels.size() != features.size())
    throw data_error(std::string(key) + ": " + std::to_string(features.size())
                     + " features files but " + std::to_string(labels.size())
                     + " labels files; IDX and .npy need one labels file per features file (" + key
                     + "-labels)");
  for (size_t i = 0; i < features.size(); ++i) {
    if (format_of_name(features[i]) != format && options.format.empty())
      throw data_error(features[i] + ": not a " + name_of(format)
                       + " file like the first of the set; set data.format where the names "
                         "do not tell");
    split.files.push_back({features[i], labels_in_text(format) ? "" : labels[i], 0, 0});
  }
  return split;
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

std::shared_ptr<const data_split> catalog_split(std::shared_ptr<data_split> split,
                                                const data_split* train) {
  if (train)
    split->csv.fills = train->csv.fills; // empty cells become what they do in training
  std::vector<file_scan> scans;
  for (auto& file : split->files)
    scans.push_back(scan_file(*split, file));
  check_item_shapes(*split, scans);
  if (train) {
    if (num_elements(scans[0].item_shape) != train->features())
      throw data_error(split->files[0].features + ": examples of shape "
                       + to_string(scans[0].item_shape) + ", but the training set's are "
                       + to_string(train->item_shape));
    if (scans[0].keys != train->keys)
      throw data_error(split->files[0].features
                       + ": its categorical columns differ from the training set's");
    split->item_shape = train->item_shape;
    split->keys = train->keys;
    split->task = train->task;
    split->classes = train->classes;
    split->label_names = train->label_names;
    split->norm = train->norm;
  }
  apply_classes(split, scans);
  return split;
}

void write_split(json_writer& w, const data_split& s, bool brief) {
  w.begin_object().key("records").integer(s.usable_records());
  w.key("bad_records").integer(s.bad_records_total());
  w.key("files").begin_array();
  for (auto& f : s.files)
    if (!brief || f.bad > 0) {
      w.begin_object().key("path").string(f.features);
      w.key("records").integer(f.records).key("bad_records").integer(f.bad).end_object();
    }
  w.end_array().end_object();
}

void write_normalization(json_writer& w, const normalizer& norm, bool brief) {
  w.begin_object().key("kind").string(
    name_of(norm.kind == normalization::automatic ? normalization::none : norm.kind));
  if (norm.kind == normalization::scale)
    w.key("scale").number(double{norm.scale}, "%.9g");
  if (norm.kind == normalization::standardize && !brief) {
    w.key("mean").begin_array();
    for (float mean : norm.mean)
      w.number(double{mean}, "%.9g");
    w.end_array().key("stddev").begin_array();
    for (size_t i = 0; i < norm.mean.size(); ++i)
      w.number(1.0 / double{norm.inv_stddev[i]}, "%.9g");
    w.end_array();
  }
  w.end_object();
}

// Empty numeric cells: every column's fill (brief: those that had empty
// cells in training, which carry an indicator).
void write_missing(json_writer& w, const missing_fills& fills, bool brief) {
  w.begin_array();
  for (size_t c = 0; c < fills.value.size(); ++c) {
    if (brief && !fills.indicator[c])
      continue;
    w.begin_object().key("column").string(fills.column[c]);
    if (std::isnan(fills.value[c]))
      w.key("refuse").boolean(true);
    else
      w.key("fill").number(double{fills.value[c]}, "%.9g");
    w.key("indicator").boolean(fills.indicator[c] != 0).end_object();
  }
  w.end_array();
}

std::string catalog_json(const data_catalog& catalog, bool brief) {
  auto& t = *catalog.train;
  json_writer w;
  w.begin_object().key("format").string(name_of(t.format)).key("task").string(name_of(t.task));
  w.key("input_shape").begin_array();
  for (auto d : t.item_shape)
    w.integer(d);
  w.end_array().key("classes").integer(t.classes);
  if (t.keys.sparse()) {
    w.key("keys").begin_object().key("dense").integer(t.keys.dense);
    w.key("fields").integer(t.keys.fields).key("keys_per_field").integer(t.keys.keys_per_field);
    w.end_object();
  }
  w.key("label_names").begin_array();
  for (auto& name : t.label_names)
    w.string(name);
  w.end_array();
  w.key("normalize");
  write_normalization(w, t.norm, brief);
  if (t.csv.fills.known()) {
    w.key("missing");
    write_missing(w, t.csv.fills, brief);
  }
  w.key("train");
  write_split(w, t, brief);
  w.key("test");
  write_split(w, *catalog.test, brief);
  if (catalog.validation) {
    w.key("validation");
    write_split(w, *catalog.validation, brief);
  }
  return w.end_object().text();
}

} // namespace

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

namespace {

// data.follow: the test set's files tell the shape, classes and
// normalisation; the training set is the directory, read as files arrive.
data_catalog follow_catalog(const data_options& options, const std::string& fashion_mnist_dir) {
  auto& dir = options.train.front();
  if (!std::filesystem::is_directory(dir))
    throw data_error("data.follow = true: data.train = " + dir
                     + " is not a directory; name the directory whose files are followed");
  auto probe = options;
  probe.follow = false;
  probe.train = options.test;
  auto out = catalog_data(probe, fashion_mnist_dir);
  auto train = std::make_shared<data_split>(*out.train);
  train->name = "training set (followed in " + dir + ")";
  train->files.clear();
  train->follow = dir;
  out.train = train;
  return out;
}

} // namespace

data_catalog catalog_data(const data_options& options, const std::string& fashion_mnist_dir) {
  auto problems = data_option_problems(options);
  if (!problems.empty())
    throw data_error(problems.front());
  if (options.follow)
    return follow_catalog(options, fashion_mnist_dir);
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
    auto label_files = labels_in_text(format)
                         ? std::vector<std::string>{}
                         : expand_paths(labels, (std::string(key) + "-labels").c_str());
    return std::make_shared<data_split>(new_split(name, format, o, files, label_files, key));
  };
  auto train = make("training set", o.train, o.train_labels, "data.train");

  std::vector<file_scan> scans;
  for (auto& file : train->files)
    scans.push_back(scan_file(*train, file));
  check_item_shapes(*train, scans);
  resolve_missing_values(*train, scans);
  train->item_shape = item_shape_of(o, scans[0], train->files[0].features);
  train->keys = scans[0].keys;
  if (train->keys.sparse() && !o.input_shape.empty())
    throw data_error("data.input-shape does not apply to categorical data (its examples are keys "
                     "and dense values); leave it out");
  find_classes(*train, o, scans);
  train->norm = make_normalizer(o, *train, scans[0]);
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
  auto& fills = t.csv.fills;
  for (size_t c = 0; c < fills.indicator.size(); ++c)
    if (fills.indicator[c])
      out.push_back("empty cells of column " + fills.column[c] + " read "
                    + std::to_string(fills.value[c]) + " (data.missing-values), with an indicator");
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
