#pragma once
// The shard's side of its bulk server (actors/net/bulk_server.hpp): pulls
// pin values in the store under the store's own run check, and pushes enter
// the shard as the push message a BASP peer sends, so that one path (the
// shard's mailbox and on_push) checks and applies every push.
#include <caf/actor_addr.hpp>
#include <caf/fwd.hpp>

#include "actors/net/bulk_server.hpp"
#include "actors/ps/traffic_counter.hpp"
#include "actors/ps/variable_store.hpp"

namespace troupe {

/// `store` and `traffic` are the shard's and must outlive the bulk server.
bulk_endpoint shard_endpoint(caf::actor_system& sys, caf::actor_addr shard,
                             const variable_store& store, traffic_counter& traffic);

} // namespace troupe
