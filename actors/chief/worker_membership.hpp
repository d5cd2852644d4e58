#pragma once
// The chief's elastic membership, without CAF: which workers read the
// training data, and so each one's share of it (its rank among them, in
// index order, of their count). The listed workers are members from the
// start, and a lost one stays one (a restarted worker continues its share);
// a worker beyond the list (cluster.max-workers) becomes one when admitted;
// any worker stops being one when it leaves (ends normally while the run
// trains: SIGTERM, a scale-down). Shares change where each worker's next
// epoch begins, so a change never splits an epoch's order.
#include <cstdint>
#include <iterator>
#include <set>

namespace troupe {

class worker_membership {
public:
  struct share {
    int32_t rank = 0, count = 1;
    bool operator==(const share& o) const { return rank == o.rank && count == o.count; }
  };

  explicit worker_membership(int32_t listed) {
    for (int32_t i = 0; i < listed; ++i)
      members_.insert(i);
  }

  /// Admitted; true when it was not a member (the shares change).
  bool joined(int32_t index) { return members_.insert(index).second; }
  /// Left the run; true when it was a member (the shares change).
  bool left(int32_t index) { return members_.erase(index) > 0; }

  bool member(int32_t index) const { return members_.count(index) > 0; }
  int32_t count() const noexcept { return static_cast<int32_t>(members_.size()); }
  const std::set<int32_t>& members() const noexcept { return members_; }

  /// The share of member `index`; a worker that is not one reads as if it
  /// were (the rank it would take, of one more).
  share share_of(int32_t index) const {
    auto at = members_.lower_bound(index);
    auto rank = static_cast<int32_t>(std::distance(members_.begin(), at));
    bool is_member = at != members_.end() && *at == index;
    return {rank, count() + (is_member ? 0 : 1)};
  }

private:
  std::set<int32_t> members_;
};

} // namespace troupe
