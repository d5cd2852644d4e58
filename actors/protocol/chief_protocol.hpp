#pragma once
// What the chief is told, and by whom: workers' readiness, reports and
// non-finite gradients, the token queue's updates, evaluators' follow; and
// its checkpoint source, which serves evaluators the checkpoints.
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/protocol/worker_protocol.hpp"
#include "tensor/nn/declared_model.hpp"

namespace troupe {

/// Serves the chief's checkpoints to evaluators over the network, so that an
/// evaluator needs no volume shared with the chief; it lives in the chief's
/// process and outlasts the chief actor until its followers have the last
/// checkpoint (or cluster.recovery-timeout passed).
using checkpoint_source_actor = caf::typed_actor<
  // a follower: the newest complete checkpoint after `step`
  caf::replies_to<ckpt_list_atom, int64_t>::with<checkpoint_listing>,
  // a follower: (step, a file of its listing, offset, the token of the last
  // piece it received or 0) -> up to checkpoint_chunk_bytes of it; a name
  // off the listing, or a read past the window of pieces on the way, is refused
  caf::replies_to<ckpt_read_atom, int64_t, std::string, uint64_t, uint64_t>::with<checkpoint_chunk>,
  // its own process: the run is over
  caf::reacts_to<stop_atom>>;

/// A worker found a non-finite gradient and pushed nothing: async, the chief
/// revokes the step and grants the next; sync, the chief ends the run (no
/// step can complete without it) and answers stop.
using nonfinite_handler = caf::replies_to<nonfinite_atom, step_report>::with<step_grant>;

/// A worker following a directory (data.follow) that has no data for the
/// step it was granted gives the step back (report.step; nothing pushed),
/// and asks again once data came: async, the step goes to another worker
/// or back to the pool, not counted as refused, and a save's fence does not
/// wait for it. Sync ignores it (the token is the worker's until it comes).
using idle_handler = caf::reacts_to<idle_atom, step_report>;

/// Async with train.report-every > 1: the outcomes of a worker's steps, in
/// the order computed (at most its lease) -> the steps that fill its lease
/// again (none while it still holds some and none can be granted), or one
/// grant with stop.
using reports_handler =
  caf::replies_to<reports_atom, std::vector<step_report>>::with<std::vector<step_grant>>;

/// The chief (published). It admits one live worker per index of the
/// cluster; reports and non-finite gradients come from that worker only.
using chief_actor =
  caf::typed_actor<hello_handler,
                   // a worker: its index -> the plan, answered once the variables are initialised
                   caf::replies_to<ready_atom, int32_t>::with<training_plan>,
                   // a worker whose program declares the model (train.model =
                   // declared): its index and declaration -> the plan, once the
                   // first declaration is placed and initialised; another
                   // declaration than the run's is refused, naming the difference
                   caf::replies_to<ready_atom, int32_t, model_declaration>::with<training_plan>,
                   // an admitted worker: what its program reported (w.report)
                   caf::reacts_to<metrics_atom, reported_metrics>,
                   // an admitted worker, async: its step's outcome -> the next grant or stop
                   report_handler,
                   // an admitted worker, async with report-every > 1: several steps' outcomes
                   reports_handler,
                   // an admitted worker: a non-finite gradient
                   nonfinite_handler,
                   // an admitted worker following a directory: a step given back
                   idle_handler,
                   // its token queue, sync: each update
                   caf::reacts_to<step_done_atom, step_summary>,
                   // an evaluator: where to read the checkpoints (an error where none are served)
                   caf::replies_to<follow_atom>::with<checkpoint_source_actor>>;

} // namespace troupe
