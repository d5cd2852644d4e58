#pragma once
// Sync mode's token queue: what workers, shards and the chief send it.
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/protocol/worker_protocol.hpp"

namespace troupe {

/// Sync mode's token queue (lives beside the chief, not published).
using token_queue_actor = caf::typed_actor<
  // a worker the chief admitted, for itself only
  report_handler,
  // a shard of this run: shard `index` applied an update and is now at `step`
  caf::reacts_to<applied_atom, run_id, int32_t, int64_t, double>,
  // the chief: worker `index` is this actor from now on
  caf::reacts_to<admit_atom, int32_t, worker_actor>,
  // the chief: release every waiting worker with stop
  caf::reacts_to<stop_atom>>;

} // namespace troupe
