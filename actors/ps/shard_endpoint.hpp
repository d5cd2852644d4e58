#pragma once
// The shard's side of its bulk server (actors/net/bulk_server.hpp): pulls
// and fetches go to the shard's service on the connection's thread (no hop
// through the shard actor), pushes enter the shard as the push message a
// BASP peer sends, so that one door, the service, checks and counts every
// request and the actor applies every push.
#include <caf/actor_addr.hpp>
#include <caf/fwd.hpp>

#include "actors/net/bulk_server.hpp"
#include "actors/ps/shard_service.hpp"

namespace troupe {

/// `service` is the shard's and must outlive the bulk server.
bulk_endpoint shard_endpoint(caf::actor_system& sys, caf::actor_addr shard, shard_service& service);

} // namespace troupe
