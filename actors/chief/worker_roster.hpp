#pragma once
// The chief's record of its workers, without CAF: which actor holds each
// index of the cluster (one at a time), and how the ones that left ended:
// normally, lost (killed, unreachable: the run survives them) or failed (an
// error of their own: the run cannot report success). Addr is what
// identifies an actor: a caf::actor_addr in the chief, an int in tests.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

template <class Addr>
class worker_roster {
public:
  /// What a worker's ready request claims.
  enum class claim {
    fresh,        ///< a free index of the cluster
    again,        ///< the index this very actor holds already
    taken,        ///< an index another actor holds
    out_of_range, ///< no such worker in the cluster
  };

  explicit worker_roster(int32_t size) : size_(size) {}

  claim check(int32_t index, const Addr& who) const {
    if (index < 0 || index >= size_)
      return claim::out_of_range;
    auto i = held_.find(index);
    if (i == held_.end())
      return claim::fresh;
    return i->second == who ? claim::again : claim::taken;
  }

  void admit(int32_t index, Addr who) { held_[index] = std::move(who); }

  /// The index `who` held, now free, or nullopt for an actor holding none.
  std::optional<int32_t> leave(const Addr& who) {
    for (auto i = held_.begin(); i != held_.end(); ++i)
      if (i->second == who) {
        auto index = i->first;
        held_.erase(i);
        return index;
      }
    return std::nullopt;
  }

  std::optional<Addr> holder(int32_t index) const {
    auto i = held_.find(index);
    return i == held_.end() ? std::nullopt : std::optional<Addr>(i->second);
  }

  /// A worker that left with an error of its own: the run cannot end "ok".
  void failed(int32_t index, const std::string& why) {
    failures_.push_back("worker:" + std::to_string(index) + " failed: " + why);
  }

  /// A worker killed or cut off: the others carry on.
  void lost() { ++lost_; }

  const std::map<int32_t, Addr>& live() const noexcept { return held_; }
  int32_t size() const noexcept { return size_; }
  const std::vector<std::string>& failures() const noexcept { return failures_; }
  uint64_t lost_count() const noexcept { return lost_; }

private:
  int32_t size_;
  std::map<int32_t, Addr> held_;
  std::vector<std::string> failures_;
  uint64_t lost_ = 0;
};

} // namespace troupe
