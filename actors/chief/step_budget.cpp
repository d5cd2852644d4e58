#include "actors/chief/step_budget.hpp"

#include <algorithm>

namespace troupe {

step_budget::step_budget(int64_t last_step, int64_t first_step, int32_t lease)
  : last_step_(last_step), lease_(std::max(lease, int32_t{1})), completed_(first_step),
    next_(first_step) {
}

size_t step_budget::held(int32_t worker) const {
  auto i = held_by_.find(worker);
  return i == held_by_.end() ? 0 : i->second;
}

void step_budget::release(std::map<int64_t, int32_t>::iterator grant) {
  auto held = held_by_.find(grant->second);
  if (--held->second == 0)
    held_by_.erase(held);
  outstanding_.erase(grant);
}

std::vector<int64_t> step_budget::steps_of(int32_t worker) const {
  std::vector<int64_t> out;
  for (auto& [step, holder] : outstanding_)
    if (holder == worker)
      out.push_back(step);
  return out;
}

std::vector<int32_t> step_budget::holding() const {
  std::vector<int32_t> out;
  for (auto& entry : held_by_)
    out.push_back(entry.first);
  return out;
}

bool step_budget::has_grant(int32_t worker, int64_t step) const {
  auto i = outstanding_.find(step);
  return i != outstanding_.end() && i->second == worker;
}

std::optional<int64_t> step_budget::grant(int32_t worker) {
  if (held(worker) >= static_cast<size_t>(lease_))
    for (auto& [step, holder] : outstanding_)
      if (holder == worker)
        return step;
  int64_t step;
  if (!returned_.empty()) {
    step = *returned_.begin();
    returned_.erase(returned_.begin());
  } else if (next_ < last_step_) {
    step = next_++;
  } else {
    return std::nullopt;
  }
  outstanding_.emplace(step, worker);
  ++held_by_[worker];
  return step;
}

void step_budget::complete(int32_t worker, int64_t step) {
  if (has_grant(worker, step)) {
    release(outstanding_.find(step));
    ++completed_;
  }
}

void step_budget::revoke(int32_t worker, int64_t step) {
  if (!has_grant(worker, step))
    return;
  release(outstanding_.find(step));
  returned_.insert(step);
}

void step_budget::revoke_all(int32_t worker) {
  for (auto i = outstanding_.begin(); i != outstanding_.end();) {
    if (i->second == worker) {
      returned_.insert(i->first);
      release(i++);
    } else {
      ++i;
    }
  }
}

} // namespace troupe
