// How features are normalised (data.normalize): the normalizer a set
// applies, chosen from the options, with the training set's statistics
// for standardize.
#include <algorithm>
#include <cmath>

#include "tensor/data/catalog_steps.hpp"

namespace troupe {

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

namespace catalog_steps {

normalizer make_normalizer(const data_options& options, const data_split& train,
                           const file_scan& first) {
  normalizer out;
  auto features = train.dense_features();
  switch (options.normalize) {
    case normalization::automatic:
      if (first.holds_bytes) {
        out.kind = normalization::scale;
        out.scale = 1.0f / 255.0f;
      } else if (train.format == data_format::csv && features > 0) {
        out.kind = normalization::standardize; // statistics: compute_statistics
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
  auto features = static_cast<size_t>(split->dense_features());
  std::vector<double> sum(features, 0.0), sum_sq(features, 0.0);
  std::vector<float> x(static_cast<size_t>(split->features()));
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

} // namespace catalog_steps

} // namespace troupe
