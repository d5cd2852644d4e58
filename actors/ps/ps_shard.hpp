#pragma once
// A PS shard: answers pulls; takes each step's push once, applying it at
// once (async) or averaging R workers' pushes of the current step before
// applying them (sync, stale ones dropped and answered stale_gradient);
// refuses bad requests with an error naming the problem; quits on stop or
// when it loses the chief that initialised it (it never outlives training,
// unless told to wait for a new chief: cluster.recovery-timeout). Its state
// and every request's checks are its shard_service's, which its bulk path
// reaches too; the actor checks who sends what, talks to the chief and the
// token queue, and keeps a snapshot's promise. For a checkpoint it copies
// its state between two updates; a restored run initialises it at the
// checkpoint's step, slots included.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include <caf/actor_addr.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/net/bulk_server.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/ps/shard_service.hpp"

namespace troupe {

/// The shard as implemented: its published interface plus the deadline for
/// the chief's init, and `leave` from its own process (SIGTERM: say what
/// ends, then quit).
using ps_shard_impl = ps_shard_actor::extend<caf::reacts_to<tick_atom>, caf::reacts_to<leave_atom>>;

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
  std::string label; // "ps:0"
  /// Its state and every request's checks, for both doors (BASP and bulk).
  std::optional<shard_service> service;
  caf::actor_addr chief; // whoever initialised it: the only one it obeys
  std::optional<std::chrono::steady_clock::time_point> chief_lost_since; // waiting for a new one
  token_queue_actor token_queue; // sync: told after each step, from the chief's init
  /// A snapshot asked for a version the shard has not reached yet (sync).
  std::optional<std::pair<int64_t, caf::typed_response_promise<snapshot_index>>> snapshot_wanted;
  /// The bulk path's listener and connections (null without one).
  std::unique_ptr<bulk_server> bulk;
};

ps_shard_impl::behavior_type ps_shard(ps_shard_impl::stateful_pointer<ps_shard_state> self,
                                      ps_shard_config config);

} // namespace troupe
