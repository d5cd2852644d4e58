#pragma once
// A shard's copy of its state for a checkpoint, taken between two updates
// and handed out one tensor at a time, so that the chief's writer never
// holds more than one tensor of it and the shard frees each as it goes.
// Thread-safe: the shard takes copies on its own thread, and its bulk
// connections' threads hand tensors out beside BASP fetches.
#include <cstdint>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "actors/protocol/protocol.hpp"
#include "actors/ps/variable_store.hpp"

namespace troupe {

class snapshot_copy {
public:
  /// Replaces any earlier copy (its unfetched tensors are dropped); `ticket`
  /// is what fetches of this copy must show.
  snapshot_index take(variable_store::snapshot copy, uint64_t ticket) {
    snapshot_index index{copy.version, ticket, copy.names, {}};
    for (auto& v : copy.values)
      index.shapes.push_back(v.shape());
    std::lock_guard<std::mutex> guard{mutex_};
    copy_ = std::move(copy);
    ticket_ = ticket;
    fetched_.assign(copy_.values.size(), false);
    left_ = copy_.values.size();
    return index;
  }

  /// Drops the copy (a new run: its ticket opens nothing any more).
  void clear() {
    std::lock_guard<std::mutex> guard{mutex_};
    copy_ = {};
    fetched_.clear();
    left_ = 0;
  }

  /// Tensor `index` of the copy with `ticket`, for a peer of `run` (the
  /// store's run check first: the one check of BASP and bulk fetches alike),
  /// moved out: each once. The copy's version in `version`.
  std::variant<tensor, failure> fetch(const variable_store& store, uint64_t run,
                                      const std::string& owner, uint64_t ticket, int32_t index,
                                      int64_t* version = nullptr) {
    if (auto why = store.other_run(run))
      return failure{errc::unauthorized, owner + ": " + *why};
    std::lock_guard<std::mutex> guard{mutex_};
    if (left_ == 0 || ticket != ticket_)
      return failure{errc::unauthorized,
                     owner
                       + " holds no snapshot with that ticket (fetched, replaced, or never "
                         "taken)"};
    if (index < 0 || static_cast<size_t>(index) >= fetched_.size()
        || fetched_[static_cast<size_t>(index)])
      return failure{errc::invalid_request, owner + ": snapshot tensor " + std::to_string(index)
                                              + " does not exist or was fetched already"};
    auto i = static_cast<size_t>(index);
    fetched_[i] = true;
    if (version)
      *version = copy_.version;
    tensor out = std::move(copy_.values[i]);
    if (--left_ == 0)
      copy_ = {};
    return out;
  }

  /// Tensors still held.
  size_t left() const {
    std::lock_guard<std::mutex> guard{mutex_};
    return left_;
  }

private:
  mutable std::mutex mutex_;
  variable_store::snapshot copy_;
  uint64_t ticket_ = 0;
  std::vector<bool> fetched_;
  size_t left_ = 0;
};

} // namespace troupe
