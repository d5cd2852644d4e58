#pragma once
// The shard's side of its bulk server (actors/net/bulk_server.hpp): pulls
// pin values in the store under the store's own run check, pulls of rows
// read the shard's tables under the same check (both on the connection's
// thread, no hop through the shard actor), fetches take a checkpoint
// copy's tensors (the chief's writer), and pushes enter the shard as the
// push message a BASP peer sends, so that one path (the shard's mailbox and
// on_push) checks and applies every push.
#include <caf/actor_addr.hpp>
#include <caf/fwd.hpp>

#include "actors/net/bulk_server.hpp"
#include "actors/ps/snapshot_copy.hpp"
#include "actors/ps/table_store.hpp"
#include "actors/ps/traffic_counter.hpp"
#include "actors/ps/variable_store.hpp"

namespace troupe {

/// `store`, `tables`, `copy` and `traffic` are the shard's and must outlive
/// the bulk server; `label` ("ps:0") names it in refusals.
bulk_endpoint shard_endpoint(caf::actor_system& sys, caf::actor_addr shard,
                             const variable_store& store, table_store& tables, snapshot_copy& copy,
                             traffic_counter& traffic, std::string label);

} // namespace troupe
