#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>

#include "actors/protocol/protocol.hpp"
#include "actors/ps/sync_accumulator.hpp"
#include "actors/ps/variable_store.hpp"

namespace troupe {

struct ps_shard_config {
  int32_t index = 0;
  optimizer_config optimizer;
  /// Quit with an error when no chief initialised the shard this long (0: wait).
  std::chrono::milliseconds init_timeout{0};
};

struct ps_shard_state {
  static inline const char* name = "troupe.ps_shard";
  int32_t index = 0;
  std::optional<variable_store> store;
  shard_options options;                   // from the chief's init
  std::optional<sync_accumulator> pending; // sync mode: gradients of the current step
  std::string label;  // "ps:0"
  shard_traffic traffic;                   // counters; per-variable maps below
  std::map<std::string, std::pair<uint64_t, uint64_t>> variable_traffic; // in, out
};

/// A PS shard: answers pulls; applies pushes at once (async) or averages R
/// gradients of the current step before applying them (sync, stale ones
/// dropped and answered stale_gradient); refuses bad requests with an error
/// naming the problem; quits on stop or when it loses the chief that
/// initialised it (it never outlives training).
ps_shard_actor::behavior_type ps_shard(ps_shard_actor::stateful_pointer<ps_shard_state> self,
                                       ps_shard_config config);

} // namespace troupe
