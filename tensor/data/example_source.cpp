// One file of a set read example by example: bad records skipped or
// refused, labels mapped to classes, features normalised.
#include <algorithm>
#include <cmath>

#include "tensor/data/catalog_steps.hpp"

namespace troupe {

using catalog_steps::integer_label;
using catalog_steps::target_value;

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
  if (labels_in_text(split_->format)) {
    auto text = catalog_steps::class_text(split_->format, record_.label_text);
    if (!split_->label_names.empty()) {
      auto& names = split_->label_names;
      auto it = std::find(names.begin(), names.end(), text);
      c = it == names.end() ? -1 : it - names.begin();
    } else {
      auto v = integer_label(text);
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
                    ? reader_->where() + ": target " + quote_input(record_.label_text)
                        + " is not a finite number"
                    : reader_->where() + ": label "
                        + quote_input(labels_in_text(split_->format)
                                        ? std::string(record_.label_text)
                                        : std::to_string(record_.label))
                        + " is not one of the " + std::to_string(split_->classes) + " classes ("
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
  auto dense = static_cast<size_t>(split_->dense_features());
  split_->norm.apply(features, dense);
  if (std::all_of(features, features + dense, [](float v) { return std::isfinite(v); }))
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

} // namespace troupe
