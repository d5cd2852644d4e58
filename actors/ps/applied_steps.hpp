#pragma once
// Async mode: the global steps a shard has applied. The chief grants each
// step once, but revokes and grants it again when the worker holding it is
// lost; if that worker's push had already landed here, the second push of the
// step must not be applied again, or the shard would count more updates than
// the chief and the run could not report success. Memory follows the steps
// applied out of order, never the run's length.
#include <cstdint>
#include <set>

namespace troupe {

class applied_steps {
public:
  /// Every step below `first` counts as applied (a restored run's).
  explicit applied_steps(int64_t first = 0) : below_(first) {}

  /// Whether `step` was applied already.
  bool contains(int64_t step) const { return step < below_ || above_.count(step) > 0; }

  /// Records `step` as applied.
  void add(int64_t step) {
    if (contains(step))
      return;
    if (step != below_) {
      above_.insert(step); // out of order: remembered until the gap closes
      return;
    }
    ++below_; // the usual case, in order: no allocation
    while (!above_.empty() && *above_.begin() == below_) {
      above_.erase(above_.begin());
      ++below_;
    }
  }

  /// Steps recorded above the point below which every step is applied.
  size_t out_of_order() const { return above_.size(); }

private:
  int64_t below_ = 0; // every step in [0, below_) is applied
  std::set<int64_t> above_;
};

} // namespace troupe
