#pragma once
// A PS shard: answers pulls; applies pushes at once (async) or averages R
// gradients of the current step before applying them (sync, stale ones
// dropped and answered stale_gradient); refuses bad requests with an error
// naming the problem; quits on stop or when it loses the chief that
// initialised it (it never outlives training, unless told to wait for a new
// chief: cluster.recovery-timeout). Its state and checks are
// variable_store's, sync mode's averaging sync_accumulator's. For a
// checkpoint it copies its state between two updates (snapshot_copy); a
// restored run initialises it at the checkpoint's step, slots included.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include <caf/actor_addr.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/net/bulk_server.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/ps/applied_steps.hpp"
#include "actors/ps/snapshot_copy.hpp"
#include "actors/ps/sync_accumulator.hpp"
#include "actors/ps/table_store.hpp"
#include "actors/ps/traffic_counter.hpp"
#include "actors/ps/variable_store.hpp"

namespace troupe {

struct ps_shard_config {
  int32_t index = 0;
  optimizer_config optimizer;
  /// Quit with an error when no chief initialised the shard this long (0: wait).
  std::chrono::milliseconds init_timeout{0};
  /// When its chief is lost: 0, quit with it; else keep the state and wait
  /// this long for a new chief, whose init replaces it (cluster.recovery-timeout).
  std::chrono::milliseconds recovery_timeout{0};
  /// Where to listen for the bulk path (the shard's own address); empty: no
  /// bulk path, peers pull and push over BASP (in process).
  std::string bulk_host{};
  /// Mutual TLS on the bulk path (null: plain TCP).
  std::shared_ptr<const bulk::tls_context> bulk_tls{};
  /// The chief's address (port 0: none known). When a wait above runs out
  /// while the chief's port says it still reads its data (its lobby:
  /// apps/node/chief_lobby.hpp, bulk::chief_is_reading), the shard waits on.
  std::string chief_host{};
  uint16_t chief_port = 0;
};

struct ps_shard_state {
  static inline const char* name = "troupe.ps_shard";
  ps_shard_config config;
  int32_t index = 0;
  std::string label; // "ps:0"
  std::optional<variable_store> store;
  caf::actor_addr chief; // whoever initialised it: the only one it obeys
  std::optional<std::chrono::steady_clock::time_point> chief_lost_since; // waiting for a new one
  run_id run = 0;                          // the run it was initialised for
  shard_options options;                   // from the chief's init
  std::optional<sync_accumulator> pending; // sync mode: gradients of the current step
  table_store tables;                      // its buckets of the run's embedding tables
  applied_steps applied;                   // async mode: each granted step applies once
  traffic_counter traffic;
  std::vector<tensor> widened; // a packed push's gradients at fp32, storage kept for the next
  snapshot_copy snapshot;      // the last copy for a checkpoint, until fetched
  /// A snapshot asked for a version the shard has not reached yet (sync).
  std::optional<std::pair<int64_t, caf::typed_response_promise<snapshot_index>>> snapshot_wanted;
  /// The bulk path's listener and connections (null without one).
  std::unique_ptr<bulk_server> bulk;
};

ps_shard_impl::behavior_type ps_shard(ps_shard_impl::stateful_pointer<ps_shard_state> self,
                                      ps_shard_config config);

} // namespace troupe
