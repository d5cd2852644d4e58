// The checks on the [data] options themselves, before any file is read.
#include <cmath>

#include "tensor/data/catalog.hpp"

namespace troupe {

std::vector<std::string> data_option_problems(const data_options& o) {
  std::vector<std::string> out;
  if (!o.format.empty() && !enum_from_name<data_format>(o.format))
    out.push_back("data.format = '" + o.format + "' is not one of " + name_list<data_format>());
  if (o.train.empty() && (!o.test.empty() || !o.validation.empty() || !o.train_labels.empty()))
    out.push_back("data.train is missing: a [data] section with test or validation files needs "
                  "the training files too");
  if (o.follow && o.train.size() != 1)
    out.push_back("data.follow = true reads one directory: data.train must name it alone");
  if (o.follow && o.format != "criteo" && o.format != "libsvm")
    out.push_back("data.follow = true reads Criteo or libsvm lines as they arrive: set data.format "
                  "= \"criteo\" or \"libsvm\"");
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
  if (o.eval_memory_bytes < 0 || o.eval_memory_bytes > data_limits::max_eval_memory_bytes)
    out.push_back("data.eval-memory-bytes = " + std::to_string(o.eval_memory_bytes)
                  + " is outside 0.." + std::to_string(data_limits::max_eval_memory_bytes)
                  + " (0: read the evaluation set from its files at each evaluation)");
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
  if (o.csv.max_keys < 1 || o.csv.max_keys > data_limits::max_keys)
    out.push_back("data.max-keys = " + std::to_string(o.csv.max_keys) + " is outside 1.."
                  + std::to_string(data_limits::max_keys));
  if (o.csv.categorical_columns.size() > static_cast<size_t>(data_limits::max_fields))
    out.push_back("data.categorical-columns names more than "
                  + std::to_string(data_limits::max_fields) + " columns");
  if (o.input_shape.size() > 3)
    out.push_back("data.input-shape = " + to_string(o.input_shape) + ": rank 1 to 3");
  return out;
}

} // namespace troupe
