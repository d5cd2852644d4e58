#pragma once
// How a troupe-node task reaches its peers and is reached: connect with
// retry and a hello (plain or mutual TLS), publish, find a lost peer again
// at its address, and where the bulk path to each shard is.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/net/bulk_client.hpp"
#include "actors/protocol/peer_reconnect.hpp"
#include "actors/protocol/protocol.hpp"
#include "config/node/node_config.hpp"

namespace troupe::node {

/// The chief (or a shard) at `address`, retrying with backoff for `within`
/// (cluster.connect-timeout at start, cluster.recovery-timeout after a
/// loss), its protocol version checked with a hello.
caf::expected<chief_actor> connect_to_chief(caf::actor_system& sys, const node_setup& setup,
                                            std::chrono::milliseconds within);
caf::expected<ps_shard_actor> connect_to_shard(caf::actor_system& sys, const node_setup& setup,
                                               size_t shard, std::chrono::milliseconds within);
/// Every shard of the cluster, in task order; false (logged) if one is unreachable.
bool connect_shards(caf::actor_system& sys, const node_setup& setup,
                    std::vector<ps_shard_actor>& shards);
/// How this task reaches a lost peer again: at the same address.
peer_reconnect reconnect_to_peers(caf::actor_system& sys, const node_setup& setup);

/// Listens at `address` for the shard (the chief); false (logged) when it
/// cannot. Published with its typed interface, which peers check.
bool publish(caf::actor_system& sys, const node_setup& setup, const ps_shard_actor& shard,
             const host_port& address);
bool publish(caf::actor_system& sys, const node_setup& setup, const chief_actor& chief,
             const host_port& address);

/// The bulk path of this task: on unless cluster.bulk-path = false, under
/// the same mutual TLS as BASP when [openssl] is configured.
struct bulk_path {
  bool on = false;
  std::shared_ptr<const bulk::tls_context> tls;
};
/// None (logged) when the TLS files do not load.
std::optional<bulk_path> bulk_path_of(const node_config& cfg, const node_setup& setup);
/// Where a worker (or the chief) opens the bulk path to each shard.
bulk_peers bulk_peers_of(const node_setup& setup, const bulk_path& bulk);

} // namespace troupe::node
