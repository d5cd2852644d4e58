#pragma once
// How a task of troupe-node reaches a peer again after it was lost: the
// worker and the chief connect (with retries, at most `within`) to the
// address the cluster file gives. The library's in-process clusters leave
// them empty.
#include <chrono>
#include <cstdint>
#include <functional>

#include <caf/expected.hpp>

#include "actors/protocol/protocol.hpp"

namespace troupe {

struct peer_reconnect {
  std::function<caf::expected<chief_actor>(std::chrono::milliseconds within)> chief;
  std::function<caf::expected<ps_shard_actor>(int32_t shard, std::chrono::milliseconds within)>
    shard;
  explicit operator bool() const { return chief && shard; }
};

} // namespace troupe
