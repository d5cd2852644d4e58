#pragma once
// What a worker is told: the plan the chief answers its `ready` with (its
// slices, its coordinator, where its data continues), the grants that answer
// its reports, and the messages its chief may send it.
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/protocol/atoms.hpp"
#include "actors/protocol/wire.hpp"

namespace troupe {

/// Handshake, shared by every published actor: (version, job, task) -> own
/// version; another version is answered with errc::protocol_mismatch. Only
/// built-in types, so that it decodes whatever the peer's version.
using hello_handler = caf::replies_to<hello_atom, uint32_t, std::string, int32_t>::with<uint32_t>;

/// A step's outcome -> the next step or stop. Async: the chief answers at
/// once from its step budget. Sync: the token queue answers once the update
/// of the reported step is applied (the token). An applied step's report
/// carries the shards' receipts for it (step_receipts).
using report_handler = caf::replies_to<report_atom, step_report>::with<step_grant>;

/// Whoever hands workers their steps (the chief or the token queue).
using step_coordinator_actor = caf::typed_actor<report_handler>;

/// What the chief tells a ready worker: every slice of the model's variables
/// and the shard each lives on, and whom to report steps to.
struct training_plan {
  run_id run = 0;
  std::vector<planned_slice> slices;
  step_coordinator_actor coordinator;
  uint64_t data_epoch = 0;  ///< where this worker starts in its data (restored
  uint64_t data_offset = 0; ///<   from a checkpoint; 0, 0 for a fresh run),
  int32_t share_rank = 0;   ///<   in share share_rank of share_count
  int32_t share_count = 1;
  /// The share of the membership now, from the next epoch on.
  int32_t next_share_rank = 0;
  int32_t next_share_count = 1;
  /// Steps the worker may hold at once: it asks for this many at the start
  /// and reports each step without waiting for the next grant (async: 2, 3
  /// with train.pull-ahead; sync: 1, the token).
  int32_t lease = 1;
  /// Steps reported at a time (train.report-every; async only): the worker
  /// sends this many reports in one `reports` message to the chief, and its
  /// lease holds as many more steps.
  int32_t report_every = 1;
  /// The model's embedding tables as the shards hold them (their buckets
  /// say which shard owns a key), in the model's order. A model with tables
  /// pushes every step to every shard, so that each shard counts every step.
  std::vector<table_setup> tables;
  bool sync = false;
  /// Async, a worker in another process: where the chief's report channel
  /// listens (on the chief's host) and the ticket that opens one
  /// connection for this worker; 0, 0: report over BASP.
  uint16_t report_port = 0;
  uint64_t report_ticket = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, training_plan& x) {
  return f(caf::meta::type_name("training_plan"), x.run, x.slices, x.coordinator, x.data_epoch,
           x.data_offset, x.share_rank, x.share_count, x.next_share_rank, x.next_share_count,
           x.lease, x.report_every, x.tables, x.sync, x.report_port, x.report_ticket);
}

/// A worker (not published: the chief reaches it through its ready request).
using worker_actor = caf::typed_actor<
  // the chief: is this worker alive? (before a second one may take its index)
  hello_handler,
  // the chief: training is over, quit
  caf::reacts_to<stop_atom>,
  // the chief: the run ended otherwise (a run_end, why): quit with it
  caf::reacts_to<stop_atom, int32_t, std::string>,
  // its chief, after restoring every shard from a checkpoint: the new run's plan
  caf::reacts_to<plan_atom, training_plan>,
  // its chief, when workers joined or left: read share `rank` of `count`
  // from the next epoch on
  caf::reacts_to<share_atom, int32_t, int32_t>>;

} // namespace troupe
