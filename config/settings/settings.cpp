#include "config/settings/settings.hpp"

namespace troupe {

std::string device_of(const training_settings& s, int32_t worker) {
  auto i = static_cast<size_t>(worker);
  return i < s.worker_devices.size() ? s.worker_devices[i] : s.device;
}

int64_t batch_size_of(const training_settings& s, int32_t worker) {
  auto i = static_cast<size_t>(worker);
  return i < s.worker_batch_sizes.size() ? s.worker_batch_sizes[i] : s.batch_size;
}

model_options model_options_of(const training_settings& s) {
  auto options = s.network;
  options.seed = s.seed;
  return options;
}

} // namespace troupe
