#include "actors/token_queue/token_ledger.hpp"

#include <algorithm>

namespace troupe {

std::optional<step_grant> token_ledger::report(const step_report& r) {
  if (r.step >= 0) {
    if (r.applied) {
      loss_sum_ += r.loss;
      ++applied_reports_;
      correct_ += r.correct;
      examples_ += r.examples;
    } else {
      ++dropped_;
    }
  }
  if (stopped_)
    return step_grant{global_step_, true};
  if (r.step < global_step_) {
    ++tokens_;
    return step_grant{global_step_, false};
  }
  return std::nullopt;
}

std::vector<step_summary> token_ledger::applied(int64_t step, double straggler_ms, size_t waiting) {
  reached_[step].push_back(straggler_ms);
  std::vector<step_summary> out;
  // Shards apply steps in order, so updates complete in order as well.
  while (!reached_.empty() && reached_.begin()->first == global_step_ + 1
         && static_cast<int32_t>(reached_.begin()->second.size()) >= shards_) {
    auto& stragglers = reached_.begin()->second;
    step_summary s;
    s.step = ++global_step_;
    s.loss = applied_reports_ ? loss_sum_ / static_cast<double>(applied_reports_) : 0;
    s.correct = correct_;
    s.examples = examples_;
    s.straggler_ms = *std::max_element(stragglers.begin(), stragglers.end());
    s.dropped = dropped_;
    s.tokens = tokens_ + (out.empty() ? waiting : 0);
    reached_.erase(reached_.begin());
    loss_sum_ = 0;
    applied_reports_ = correct_ = examples_ = dropped_ = tokens_ = 0;
    stopped_ = stopped_ || global_step_ >= last_step_;
    out.push_back(s);
  }
  return out;
}

} // namespace troupe
