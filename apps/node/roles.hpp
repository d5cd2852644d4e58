#pragma once
// The tasks a troupe-node process runs, each to its exit code: the whole
// cluster in one process, a ps shard, the chief, a worker (the evaluator is
// in evaluator_job.hpp).
#include <caf/fwd.hpp>

#include "actors/net/connection_warden.hpp"
#include "apps/node/chief_lobby.hpp"
#include "apps/node/peers.hpp"
#include "config/node/node_config.hpp"

namespace troupe::node {

int run_whole_cluster(caf::actor_system& sys, const node_setup& setup);
int run_ps(caf::actor_system& sys, const node_setup& setup, const warden_limits& limits,
           const bulk_path& bulk);
/// `lobby`: the chief's port as held while it read its data (null: none);
/// freed once the shards are initialised, for the chief to publish on.
int run_chief(caf::actor_system& sys, const node_setup& setup, const warden_limits& limits,
              const bulk_path& bulk, chief_lobby* lobby = nullptr);
/// `wrap`: the model the worker computes with, in place of the settings'
/// (the Python package's; empty: the settings').
int run_worker(caf::actor_system& sys, const node_setup& setup, const bulk_path& bulk,
               const model_wrapper& wrap = {});

} // namespace troupe::node
