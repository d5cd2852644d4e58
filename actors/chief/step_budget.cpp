#include "actors/chief/step_budget.hpp"

namespace troupe {

step_budget::step_budget(int64_t last_step, int64_t first_step)
  : last_step_(last_step), completed_(first_step), next_(first_step) {
}

std::optional<int64_t> step_budget::grant(int32_t worker) {
  if (auto i = outstanding_.find(worker); i != outstanding_.end())
    return i->second;
  int64_t step;
  if (!returned_.empty()) {
    step = *returned_.begin();
    returned_.erase(returned_.begin());
  } else if (next_ < last_step_) {
    step = next_++;
  } else {
    return std::nullopt;
  }
  outstanding_.emplace(worker, step);
  return step;
}

void step_budget::complete(int32_t worker) {
  if (outstanding_.erase(worker) > 0)
    ++completed_;
}

void step_budget::revoke(int32_t worker) {
  auto i = outstanding_.find(worker);
  if (i == outstanding_.end())
    return;
  returned_.insert(i->second);
  outstanding_.erase(i);
}

} // namespace troupe
