// What the labels of a set are: one pass over each file counts its records
// and labels as written; the training set's labels then give the classes
// (and their names), and every set's bad records are counted against them.
#include <algorithm>
#include <optional>
#include <system_error>
#include <thread>

#include "tensor/data/catalog_steps.hpp"

namespace troupe::catalog_steps {

namespace {

constexpr size_t max_distinct_labels = 65536;

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
  auto raw = std::make_shared<data_split>(*split);
  raw->norm = normalizer{}; // its statistics may be still to come
  example_source source(raw, file);
  std::vector<float> features(static_cast<size_t>(split->features()));
  int32_t label;
  float target;
  while (source.next(features.data(), label, target)) {
  }
  throw data_error(split->files[file].features + ": a label has no class");
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

} // namespace

namespace {

// Reads the records `reader` gives into `out`: records, bad ones, labels as
// written. Throws data_error for a bad record where the split's policy is
// fail, naming it.
void scan_records(const data_split& split, const data_file& file, record_reader& reader,
                  file_scan& out) {
  raw_record record;
  // The training set's first pass counts the empty cells of each numeric
  // column (NaN until the catalog knows what they become).
  bool tally = split.format == data_format::csv && !split.csv.fills.known();
  for (;;) {
    try {
      if (!reader.next(record))
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
    if (tally)
      out.columns.add(record.features.data(), out.numeric_columns.size());
    if (split.task == objective::regression) {
      if (target_value(record.label_text))
        continue;
      ++out.bad_rows;
      if (split.bad_records == bad_record_policy::fail)
        throw data_error(reader.where() + ": target " + quote_input(record.label_text)
                         + " is not a finite number (data.bad-records = skip passes over such "
                           "records)");
      continue;
    }
    auto text = labels_in_text(split.format)
                  ? std::string(class_text(split.format, record.label_text))
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
}

// What the reader says of every record of its file, before any is read.
void describe_records(const record_reader& reader, file_scan& out) {
  out.item_shape = reader.item_shape();
  out.holds_bytes = reader.holds_bytes();
  out.keys = reader.keys();
  out.label_column = reader.label_name();
  out.numeric_columns = reader.numeric_columns();
}

file_scan scan_whole(const data_split& split, const data_file& file) {
  auto reader = open_records(split.format, file.features, file.labels, split.csv);
  file_scan out;
  describe_records(*reader, out);
  scan_records(split, file, *reader, out);
  if (out.records == 0)
    throw data_error(file.features + ": holds no records (an empty file?)");
  return out;
}

// The file in `ranges` pieces of bytes, each scanned by a reader of its own
// on a thread of its own, their counts added up; nullopt where the file
// cannot be split (gzipped, binary, too small) or a piece failed, which the
// whole scan then reports as it finds it.
std::optional<file_scan> scan_in_ranges(const data_split& split, const data_file& file,
                                        const scan_split& how) {
  if (how.ranges < 2 || !labels_in_text(split.format))
    return std::nullopt;
  int64_t bytes = -1;
  try {
    bytes = plain_text_bytes(file.features);
  } catch (const troupe_error&) {
    return std::nullopt; // the whole scan names what is wrong with the file
  }
  if (bytes < 0)
    return std::nullopt;
  auto ranges = static_cast<size_t>(std::min<uint64_t>(
    how.ranges, static_cast<uint64_t>(bytes) / std::max<uint64_t>(how.min_bytes, 1)));
  if (ranges < 2)
    return std::nullopt;
  std::vector<file_scan> scans(ranges);
  std::vector<char> failed(ranges, 0);
  auto scan_range = [&](size_t r) {
    try {
      auto reader = open_records(split.format, file.features, file.labels, split.csv);
      auto size = static_cast<uint64_t>(bytes);
      if (!reader->restrict_to(size * r / ranges, size * (r + 1) / ranges))
        throw data_error(file.features + ": cannot be read by range");
      describe_records(*reader, scans[r]);
      scan_records(split, file, *reader, scans[r]);
    } catch (...) {
      failed[r] = 1;
    }
  };
  std::vector<std::thread> threads;
  for (size_t r = 1; r < ranges; ++r) {
    try {
      threads.emplace_back(scan_range, r);
    } catch (const std::system_error&) {
      scan_range(r); // no thread to be had: this one reads the range
    }
  }
  scan_range(0);
  for (auto& t : threads)
    t.join();
  if (std::find(failed.begin(), failed.end(), 1) != failed.end())
    return std::nullopt;
  auto out = std::move(scans[0]);
  for (size_t r = 1; r < ranges; ++r) {
    out.records += scans[r].records;
    out.bad_rows += scans[r].bad_rows;
    for (auto& [text, count] : scans[r].label_counts)
      out.label_counts[text] += count;
    out.columns.merge(scans[r].columns);
  }
  if (out.label_counts.size() > max_distinct_labels || out.records == 0)
    return std::nullopt;
  return out;
}

} // namespace

scan_split default_scan_split() {
  return {std::clamp(std::thread::hardware_concurrency(), 1u, 8u), uint64_t{32} << 20};
}

file_scan scan_file(const data_split& split, const data_file& file, const scan_split& how) {
  if (auto out = scan_in_ranges(split, file, how))
    return std::move(*out);
  return scan_whole(split, file);
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
  if (!labels_in_text(split.format))
    throw data_error(split.name + ": labels that are not integers");
  for (auto& [text, count] : all)
    split.label_names.push_back(text); // std::map: sorted, the same on every node
  split.classes = static_cast<int64_t>(split.label_names.size());
  if (options.classes > 0 && options.classes != split.classes)
    throw data_error("data.classes = " + std::to_string(options.classes)
                     + " but the training set's labels name " + std::to_string(split.classes)
                     + " classes");
}

} // namespace troupe::catalog_steps
