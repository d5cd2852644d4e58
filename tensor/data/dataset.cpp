#include "tensor/data/dataset.hpp"

#include <algorithm>
#include <cstring>

#include "tensor/core/error.hpp"

namespace troupe {

void check_dataset(const dataset& data, int64_t classes, const std::string& what) {
  if (data.size() == 0)
    throw data_error(what + " holds no examples");
  if (data.images.rank() != 2 || data.images.dim(0) != static_cast<int64_t>(data.size()))
    throw data_error(what + ": " + std::to_string(data.size()) + " labels for images of shape "
                     + to_string(data.images.shape()));
  for (size_t i = 0; i < data.size(); ++i)
    if (data.labels[i] < 0 || data.labels[i] >= classes)
      throw data_error(what + ": example " + std::to_string(i) + " has label "
                       + std::to_string(data.labels[i]) + ", but the model has "
                       + std::to_string(classes) + " classes (0.." + std::to_string(classes - 1)
                       + ")");
  auto bad = data.images.first_non_finite();
  if (bad != data.images.size())
    throw data_error(what + ": example "
                     + std::to_string(bad / static_cast<size_t>(data.features()))
                     + " has a feature that is not finite");
}

void copy_batch(const dataset& data, size_t first, size_t count, batch& out) {
  count = std::min(count, data.size() - std::min(first, data.size()));
  auto features = data.features();
  out.images.resize({static_cast<int64_t>(count), features});
  std::memcpy(out.images.data(), data.images.data() + first * features,
              count * features * sizeof(float));
  out.labels.assign(data.labels.begin() + first, data.labels.begin() + first + count);
  if (data.targets.empty())
    out.targets.clear();
  else
    out.targets.assign(data.targets.begin() + first, data.targets.begin() + first + count);
}

} // namespace troupe
