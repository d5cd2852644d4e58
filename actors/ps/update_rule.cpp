#include "actors/ps/update_rule.hpp"

namespace troupe {

namespace {

// Revocations are rare (a worker that held a step too long); a chief that
// sends millions cannot grow a shard without bound.
constexpr size_t max_revoked = 4096;

} // namespace

push_verdict update_rule::judge(int32_t worker, int64_t step) const {
  if (!sync_) {
    if (applied_.contains(step))
      return push_verdict::repeated;
    return revoked_.count({worker, step}) ? push_verdict::revoked : push_verdict::take;
  }
  if (revoked_.count({worker, step}))
    return push_verdict::revoked;
  if (step >= last_step_)
    return push_verdict::past_end;
  if (step < step_)
    return push_verdict::stale;
  if (step > step_)
    return push_verdict::ahead;
  return contributors_.count(worker) ? push_verdict::repeated : push_verdict::take;
}

void update_rule::took(int32_t worker, int64_t step) {
  if (!sync_) {
    applied_.add(step);
    for (auto it = revoked_.lower_bound({INT32_MIN, 0}); it != revoked_.end();)
      it = it->second == step ? revoked_.erase(it) : std::next(it);
    return;
  }
  if (contributors_.empty())
    first_ = std::chrono::steady_clock::now();
  contributors_.insert(worker);
}

void update_rule::advance() {
  last_straggler_ms_ =
    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - first_).count();
  contributors_.clear();
  ++step_;
  for (auto it = revoked_.begin(); it != revoked_.end();)
    it = it->second < step_ ? revoked_.erase(it) : std::next(it);
}

void update_rule::revoke(int32_t worker, int64_t step) {
  if (revoked_.size() >= max_revoked)
    revoked_.erase(revoked_.begin());
  revoked_.insert({worker, step});
}

} // namespace troupe
