#pragma once
// A task's metrics port while it runs (metrics_endpoint.hpp): its liveness
// probe asks an actor of the process's scheduler for an answer, so a process
// whose actors are stuck fails it, while one whose shard is busy restoring
// a large checkpoint (one actor, one thread) does not.
#include <memory>

#include <caf/fwd.hpp>

#include "config/node/node_config.hpp"

namespace troupe::node {

class task_endpoint {
public:
  /// Serves /metrics, /healthz and /readyz where setup.metrics says; a port
  /// that cannot be opened is logged and the task goes on without it.
  task_endpoint(caf::actor_system& sys, const node_config& cfg, const node_setup& setup);
  ~task_endpoint();
  task_endpoint(const task_endpoint&) = delete;
  task_endpoint& operator=(const task_endpoint&) = delete;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::node
