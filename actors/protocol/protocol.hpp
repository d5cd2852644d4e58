#pragma once
// The Troupe wire protocol, written down once: every atom, message type and
// typed actor interface, with who may send what. docs/protocol.md mirrors
// this file (a test compares the version); change both.
//
// Roles: ps_shard (holds variables), chief (initialises, owns global_step,
// grants steps in async mode, stops), worker (pull -> compute -> push ->
// report), token_queue (sync mode: releases workers after each update).
// Each actor's interface has two parts: the published one (`*_actor`), the
// messages other actors may send it, and the one it is implemented with
// (`*_impl`), which adds the messages it sends only to itself (timers). Peers
// only ever hold the published handle.
#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/protocol/wire.hpp"
#include "tensor/core/error.hpp"
#include "tensor/core/tensor.hpp"
#include "tensor/plan/training_plan.hpp"
#include "tensor/sparse/table_setup.hpp"

namespace troupe {

/// Bumped on every incompatible change; peers of another version are refused.
constexpr uint32_t protocol_version = 15;

// -- atoms (at most 10 characters) -------------------------------------------

using hello_atom = caf::atom_constant<caf::atom("hello")>;         ///< version handshake
using init_atom = caf::atom_constant<caf::atom("init")>;           ///< chief -> shard: first values
using pull_atom = caf::atom_constant<caf::atom("pull")>;           ///< read variables
using push_atom = caf::atom_constant<caf::atom("push")>;           ///< apply gradients
using rows_atom = caf::atom_constant<caf::atom("rows")>;           ///< read embedding rows
using push_rows_atom = caf::atom_constant<caf::atom("push_rows")>; ///< apply row gradients
using ready_atom = caf::atom_constant<caf::atom("ready")>;         ///< worker -> chief: the plan
using report_atom = caf::atom_constant<caf::atom("report")>;       ///< worker -> coordinator
using nonfinite_atom = caf::atom_constant<caf::atom("nonfinite")>; ///< worker -> chief
using reports_atom = caf::atom_constant<caf::atom("reports")>;     ///< worker -> chief: a batch
using stop_atom = caf::atom_constant<caf::atom("stop")>; ///< chief -> all: shut down (or abort)
using applied_atom = caf::atom_constant<caf::atom("applied")>;     ///< shard -> token queue
using step_done_atom = caf::atom_constant<caf::atom("step_done")>; ///< token queue -> chief
using replicas_atom = caf::atom_constant<caf::atom("replicas")>;   ///< chief -> shard: R
using stats_atom = caf::atom_constant<caf::atom("stats")>;         ///< chief -> shard: traffic
using admit_atom = caf::atom_constant<caf::atom("admit")>;         ///< chief -> token queue
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;   ///< chief -> shard: copy state
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;     ///< chief -> shard: a copied tensor
using restore_atom = caf::atom_constant<caf::atom("restore")>; ///< chief -> shard: a slot
using plan_atom = caf::atom_constant<caf::atom("plan")>;     ///< chief -> worker: after a recovery
using bulk_atom = caf::atom_constant<caf::atom("bulk")>;     ///< worker, chief -> shard: bulk port
using follow_atom = caf::atom_constant<caf::atom("follow")>; ///< evaluator -> chief: checkpoints
using ckpt_list_atom = caf::atom_constant<caf::atom("ckpt_list")>; ///< evaluator -> source
using ckpt_read_atom = caf::atom_constant<caf::atom("ckpt_read")>; ///< evaluator -> source
using share_atom = caf::atom_constant<caf::atom("share")>; ///< chief -> worker: its data share
// Internal: sent by an actor to itself only, never part of a published interface.
using run_atom = caf::atom_constant<caf::atom("run")>;               ///< worker: next step
using tick_atom = caf::atom_constant<caf::atom("tick")>;             ///< chief, shard: timers
using evaluate_atom = caf::atom_constant<caf::atom("evaluate")>;     ///< chief -> its evaluator
using saved_atom = caf::atom_constant<caf::atom("saved")>;           ///< checkpoint writer -> chief
using shard_back_atom = caf::atom_constant<caf::atom("shard_back")>; ///< reconnector -> chief
using rejoin_atom = caf::atom_constant<caf::atom("rejoin")>;         ///< worker: find a new chief
using leave_atom = caf::atom_constant<caf::atom("leave")>;           ///< worker, shard: SIGTERM
/// The report channel's connection threads -> the chief: a batch of reports
using relayed_atom = caf::atom_constant<caf::atom("relayed")>;
/// The report channel's reader thread -> its worker: grants, or the loss of the channel
using granted_atom = caf::atom_constant<caf::atom("granted")>;

// -- message types -----------------------------------------------------------

/// A run's identity: a random number the chief draws at start. Every message
/// that reads or changes training state carries it (or comes from the one
/// actor allowed to send it), so that a node of another cluster, or of a
/// previous run, is refused with errc::unauthorized.
using run_id = uint64_t;

/// A shard's answer to a pull: the values in the order asked, and the number
/// of updates the shard has applied so far (its version; in sync mode, the
/// global step).
struct pull_reply {
  int64_t version = 0;
  std::vector<tensor> values;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pull_reply& x) {
  return f(caf::meta::type_name("pull_reply"), x.version, x.values);
}

/// A worker's account of one step. step < 0 means "no step yet" (the first
/// report of a worker only asks for a step). applied = false means at least
/// one shard refused its part (in sync mode also stale or past the end).
struct step_report {
  run_id run = 0;
  int32_t worker = 0;
  int64_t step = -1;
  bool applied = false;
  double loss = 0;
  uint64_t correct = 0;
  uint64_t examples = 0;
  uint64_t data_epoch = 0;  ///< where the worker's next example lies: the epoch
  uint64_t data_offset = 0; ///<   and the offset within its share of it,
  int32_t share_rank = 0;   ///<   which is share_rank of share_count (elastic
  int32_t share_count = 0;  ///<   membership changes it where an epoch begins)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_report& x) {
  return f(caf::meta::type_name("step_report"), x.run, x.worker, x.step, x.applied, x.loss,
           x.correct, x.examples, x.data_epoch, x.data_offset, x.share_rank, x.share_count);
}

/// The answer to a report: compute at global step `step` next, or stop.
/// `proof` is what the worker's pushes of that step must show the shards
/// (actors/protocol/grant_proof.hpp).
struct step_grant {
  int64_t step = 0;
  bool stop = false;
  uint64_t proof = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_grant& x) {
  return f(caf::meta::type_name("step_grant"), x.step, x.stop, x.proof);
}

/// Sync mode: what the token queue tells the chief after each update.
struct step_summary {
  int64_t step = 0; ///< the global step reached
  double loss = 0;  ///< mean loss of the applied gradients
  uint64_t correct = 0;
  uint64_t examples = 0;   ///< examples behind the applied gradients
  double straggler_ms = 0; ///< first to R-th gradient, slowest shard
  uint64_t dropped = 0;    ///< gradients of this step not applied (stale, refused)
  uint64_t tokens = 0;     ///< tokens released by this update
  /// Where each worker's next example lies, as last reported (for checkpoints).
  std::vector<int32_t> position_workers;
  std::vector<uint64_t> position_epochs;
  std::vector<uint64_t> position_offsets;
  std::vector<int32_t> position_share_ranks;
  std::vector<int32_t> position_share_counts;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_summary& x) {
  return f(caf::meta::type_name("step_summary"), x.step, x.loss, x.correct, x.examples,
           x.straggler_ms, x.dropped, x.tokens, x.position_workers, x.position_epochs,
           x.position_offsets, x.position_share_ranks, x.position_share_counts);
}

/// One variable's (or slice's) traffic on a shard.
struct variable_traffic {
  std::string name;
  uint64_t bytes_in = 0;  ///< gradient payload received by pushes
  uint64_t bytes_out = 0; ///< value payload sent in pull replies
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, variable_traffic& x) {
  return f(caf::meta::type_name("variable_traffic"), x.name, x.bytes_in, x.bytes_out);
}

/// One embedding table on one shard: its rows, bytes, what entered and left
/// it, and its hottest keys (the most frequently pushed, with their counts).
struct table_report {
  std::string name;
  uint64_t rows = 0;
  uint64_t bytes = 0;
  uint64_t admitted = 0;
  uint64_t evicted = 0;
  uint64_t not_admitted = 0; ///< occurrences dropped before admission
  std::vector<int64_t> hottest_keys;
  std::vector<uint32_t> hottest_counts;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, table_report& x) {
  return f(caf::meta::type_name("table_report"), x.name, x.rows, x.bytes, x.admitted, x.evicted,
           x.not_admitted, x.hottest_keys, x.hottest_counts);
}

/// A shard's traffic since it started: what the chief's final report shows.
struct shard_traffic {
  int32_t shard = 0;
  uint64_t bytes_held = 0; ///< variables' bytes (slots not counted)
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t pulls = 0;
  uint64_t pushes = 0;
  int64_t updates = 0; ///< updates applied (the shard's version): the chief cross-checks it
  std::vector<variable_traffic> variables; ///< by name
  /// Pushes refused because nobody granted their step to the worker they
  /// name: a stranger's or a forger's (none in a healthy run).
  uint64_t unauthorized_pushes = 0;
  /// Embedding rows: requests and keys (the pulls and pushes above count them too).
  uint64_t row_pulls = 0;
  uint64_t row_pushes = 0;
  uint64_t keys_pulled = 0;
  uint64_t keys_pushed = 0;
  std::vector<table_report> tables;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_traffic& x) {
  return f(caf::meta::type_name("shard_traffic"), x.shard, x.bytes_held, x.bytes_in, x.bytes_out,
           x.pulls, x.pushes, x.updates, x.variables, x.unauthorized_pushes, x.row_pulls,
           x.row_pushes, x.keys_pulled, x.keys_pushed, x.tables);
}

// -- typed actor interfaces --------------------------------------------------

/// Handshake, shared by every published actor: (version, job, task) -> own
/// version; another version is answered with errc::protocol_mismatch. Only
/// built-in types, so that it decodes whatever the peer's version.
using hello_handler = caf::replies_to<hello_atom, uint32_t, std::string, int32_t>::with<uint32_t>;

/// A step's outcome -> the next step or stop. Async: the chief answers at
/// once from its step budget. Sync: the token queue answers once the update
/// of the reported step is applied (the token).
using report_handler = caf::replies_to<report_atom, step_report>::with<step_grant>;

/// Whoever hands workers their steps (the chief or the token queue).
using step_coordinator_actor = caf::typed_actor<report_handler>;

/// planned_slice (tensor/plan/training_plan.hpp) on the wire.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, planned_slice& x) {
  return f(caf::meta::type_name("planned_slice"), x.name, x.shard, x.variable, x.axis, x.offset,
           x.extent);
}

/// An embedding table's rules on the wire (tensor/sparse/table_setup.hpp);
/// a shard checks them (table_setup::check) before it holds anything.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, table_setup& x) {
  auto& t = x.table;
  auto& o = t.optimizer;
  return f(caf::meta::type_name("table_setup"), t.name, t.dim, t.init.kind, t.init.scale,
           t.init.seed, o.kind, o.learning_rate, o.initial_accumulator, o.l1, o.l2, o.lr_power,
           o.beta1, o.beta2, o.epsilon, t.buckets.count, t.buckets.seed, x.admission.after_count,
           x.admission.probability, x.eviction.after_steps, x.eviction.l2_below,
           x.eviction.max_bytes, x.evict_interval, x.reduction, x.max_keys, t.kind, t.rows,
           t.partition);
}

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
  /// say which shard owns a key), in the model's order.
  std::vector<table_setup> tables;
  bool sync = false; ///< every step pushes rows to every shard
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
  // the chief: the run failed (why), quit with an error
  caf::reacts_to<stop_atom, std::string>,
  // its chief, after restoring every shard from a checkpoint: the new run's plan
  caf::reacts_to<plan_atom, training_plan>,
  // its chief, when workers joined or left: read share `rank` of `count`
  // from the next epoch on
  caf::reacts_to<share_atom, int32_t, int32_t>>;

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

/// How a shard applies pushes, sent with its first values.
struct shard_options {
  bool sync = false;
  int32_t replicas_to_aggregate = 1; ///< sync: gradients averaged per update (R)
  int64_t last_step = 0;             ///< sync: no update past this step
  token_queue_actor token_queue;     ///< sync: told after every update
  int64_t first_step = 0;            ///< the global step training starts at (a restore's)
  /// The run's key for grant proofs (grant_proof.hpp): a push must show
  /// the proof of its step for its worker. Zero: pushes are not checked.
  uint64_t grant_key0 = 0;
  uint64_t grant_key1 = 0;
  /// The run's embedding tables (each shard holds its buckets of each), and
  /// how many shards share them.
  std::vector<table_setup> tables;
  int32_t shards = 1;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_options& x) {
  return f(caf::meta::type_name("shard_options"), x.sync, x.replicas_to_aggregate, x.last_step,
           x.token_queue, x.first_step, x.grant_key0, x.grant_key1, x.tables, x.shards);
}

/// A shard's copy of its state for a checkpoint: its update count and the
/// names and shapes of what it copied (variables, then "<variable>/<slot>"),
/// fetched one tensor at a time by index. The ticket, drawn at random by the
/// shard and known only to the chief, is what a fetch must show: the chief
/// hands it to the writer that fetches in its place.
struct snapshot_index {
  int64_t version = 0;
  uint64_t ticket = 0;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  /// Each tensor's element type as the file stores it (element_type: 0 F32,
  /// 1 I64, 2 U32; empty: all F32). An I64 or U32 tensor travels as floats
  /// holding its bytes: an embedding table's keys and counters.
  std::vector<int32_t> types;
  /// The file's metadata, key then value ("emb/<table>" -> its layout).
  std::vector<std::string> metadata;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, snapshot_index& x) {
  return f(caf::meta::type_name("snapshot_index"), x.version, x.ticket, x.names, x.shapes, x.types,
           x.metadata);
}

/// A checkpoint as the chief's checkpoint source offers it to an evaluator:
/// its step (-1: none newer than asked), whether the run is over (nothing
/// newer will come), and its files, relative to the log directory
/// ("model.json", "ckpt-<step>/...") with their sizes.
struct checkpoint_listing {
  int64_t step = -1;
  bool final = false;
  std::vector<std::string> files;
  std::vector<uint64_t> sizes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_listing& x) {
  return f(caf::meta::type_name("checkpoint_listing"), x.step, x.final, x.files, x.sizes);
}

/// The most bytes one ckpt_read answers with.
constexpr uint64_t checkpoint_chunk_bytes = uint64_t{1} << 20;

/// A piece of a checkpoint file, and the token the follower shows with its
/// next read: proof that this piece reached it (read_window.hpp).
struct checkpoint_chunk {
  std::string bytes;
  uint64_t token = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_chunk& x) {
  return f(caf::meta::type_name("checkpoint_chunk"), x.bytes, x.token);
}

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

/// A parameter-server shard (published). The first init makes its sender the
/// shard's chief and fixes the run; from then on it accepts pulls and pushes
/// of that run only, and replicas, stats and stop messages from that chief
/// only (exit messages only from its own process: no peer may send one).
using ps_shard_actor = caf::typed_actor<
  hello_handler,
  // a chief, exactly once: (run, names, values, options) -> ok
  caf::replies_to<init_atom, run_id, std::vector<std::string>, std::vector<tensor>,
                  shard_options>::with<caf::ok_atom>,
  // a worker or the chief of this run: (run, names, wire precision) -> values
  // (packed at that precision, tensor/core/wire_precision.hpp) + version
  caf::replies_to<pull_atom, run_id, std::vector<std::string>, int32_t>::with<pull_reply>,
  // a worker of this run: (run, worker, global step, the step's grant proof,
  // wire precision, names, gradients packed at it) -> version after it; sync
  // mode answers stale_gradient for a step already applied; a wrong proof is
  // refused (unauthorized)
  caf::replies_to<push_atom, run_id, int32_t, int64_t, uint64_t, int32_t, std::vector<std::string>,
                  std::vector<tensor>>::with<int64_t>,
  // a worker or the chief of this run: (run, table, keys) -> the rows
  // [keys, dim] (an unseen key's initial value; nothing is inserted); keys
  // another shard owns, or more than embedding.max-keys-per-request, are
  // refused (invalid_request)
  caf::replies_to<rows_atom, run_id, int32_t, row_keys>::with<tensor>,
  // a worker of this run: (run, worker, global step, the grant's proof, table,
  // distinct keys with their occurrences, summed row gradients [keys, dim])
  // -> the table's version after it. Sync mode: every worker pushes every
  // table once a step (no keys where it touched none); stale as for push
  caf::replies_to<push_rows_atom, run_id, int32_t, int64_t, uint64_t, int32_t, row_keys,
                  tensor>::with<int64_t>,
  // the chief, sync: gradients needed per update from now on (shrink/grow)
  caf::reacts_to<replicas_atom, int32_t>,
  // a worker or the chief of this run: (run, worker index, -1 for the chief)
  // -> the port of its bulk path and a ticket that opens one connection there,
  // whose pushes must be that worker's (port 0: none; use pull and push here)
  caf::replies_to<bulk_atom, run_id, int32_t>::with<uint16_t, uint64_t>,
  // the chief: bytes, requests and updates so far, in total and per variable
  caf::replies_to<stats_atom>::with<shard_traffic>,
  // the chief, after init and before training: one optimizer slot of a
  // restored checkpoint, (run, "<variable>/<slot>", value) -> ok
  caf::replies_to<restore_atom, run_id, std::string, tensor>::with<caf::ok_atom>,
  // the chief, after init and before training: rows of an embedding table
  // from a checkpoint, those whose buckets this shard owns -> ok
  caf::replies_to<restore_atom, run_id, restored_rows>::with<caf::ok_atom>,
  // the chief: copy the state once the shard has applied `version` updates
  // (at once if it has; snapshot_passed if it is beyond) -> what was copied
  caf::replies_to<snapshot_atom, run_id, int64_t>::with<snapshot_index>,
  // whoever holds the copy's ticket (the chief's writer): tensor `index`
  // of the copy, each once
  caf::replies_to<fetch_atom, run_id, uint64_t, int32_t>::with<tensor>,
  // the chief: training is over, quit
  caf::reacts_to<stop_atom>,
  // the chief: the run failed (why), quit with an error
  caf::reacts_to<stop_atom, std::string>>;

/// The shard as implemented: plus the deadline for the chief's init, and
/// `leave` from its own process (SIGTERM: say what ends, then quit).
using ps_shard_impl = ps_shard_actor::extend<caf::reacts_to<tick_atom>, caf::reacts_to<leave_atom>>;

/// A worker found a non-finite gradient and pushed nothing: async, the chief
/// revokes the step and grants the next; sync, the chief ends the run (no
/// step can complete without it) and answers stop.
using nonfinite_handler = caf::replies_to<nonfinite_atom, step_report>::with<step_grant>;

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
                   // an admitted worker, async: its step's outcome -> the next grant or stop
                   report_handler,
                   // an admitted worker, async with report-every > 1: several steps' outcomes
                   reports_handler,
                   // an admitted worker: a non-finite gradient
                   nonfinite_handler,
                   // its token queue, sync: each update
                   caf::reacts_to<step_done_atom, step_summary>,
                   // an evaluator: where to read the checkpoints (an error where none are served)
                   caf::replies_to<follow_atom>::with<checkpoint_source_actor>>;

/// The chief as implemented: plus its watchdog, its checkpoint writer's
/// report (step, ok, the checkpoint's path or the error, bytes, seconds),
/// its shard reconnector's answer, and `stop` from its own process
/// (SIGTERM: save a checkpoint, then stop the cluster).
using chief_impl = chief_actor::extend<
  caf::reacts_to<tick_atom>,
  caf::reacts_to<saved_atom, int64_t, bool, std::string, uint64_t, double>,
  caf::reacts_to<shard_back_atom, int32_t, ps_shard_actor>,
  caf::reacts_to<shard_back_atom, int32_t, std::string>, caf::reacts_to<stop_atom>,
  // a report channel's connection (key, request): a worker's batch
  caf::reacts_to<relayed_atom, uint64_t, uint64_t, std::vector<step_report>>>;

/// The worker as implemented: plus the message that starts its next step,
/// the one that makes it look for a new chief and its helper's answer (the
/// chief found, or why not), and its recovery deadline.
using worker_impl = worker_actor::extend<
  caf::reacts_to<run_atom, uint64_t>, caf::reacts_to<rejoin_atom>,
  caf::reacts_to<rejoin_atom, chief_actor>, caf::reacts_to<rejoin_atom, std::string>,
  caf::reacts_to<tick_atom>, caf::reacts_to<leave_atom>,
  // its report channel (key, request): the grants answering a batch
  caf::reacts_to<granted_atom, uint64_t, uint64_t, std::vector<step_grant>>,
  // its report channel (key): lost, and why
  caf::reacts_to<granted_atom, uint64_t, std::string>>;

// -- registration ---------------------------------------------------------------

/// Every type that crosses the wire and is not one of CAF's own, with the
/// name it is registered under: the one list register_protocol reads (a test
/// checks that every type in every published interface is registered).
#define TROUPE_MESSAGE_TYPES(X)                                                                    \
  X(tensor)                                                                                        \
  X(std::vector<tensor>)                                                                           \
  X(pull_reply)                                                                                    \
  X(planned_slice)                                                                                 \
  X(std::vector<planned_slice>)                                                                    \
  X(training_plan)                                                                                 \
  X(step_report)                                                                                   \
  X(step_grant)                                                                                    \
  X(step_summary)                                                                                  \
  X(variable_traffic)                                                                              \
  X(std::vector<variable_traffic>)                                                                 \
  X(shard_traffic)                                                                                 \
  X(shard_options)                                                                                 \
  X(snapshot_index)                                                                                \
  X(step_coordinator_actor)                                                                        \
  X(token_queue_actor)                                                                             \
  X(ps_shard_actor)                                                                                \
  X(checkpoint_listing)                                                                            \
  X(checkpoint_chunk)                                                                              \
  X(checkpoint_source_actor)                                                                       \
  X(chief_actor)                                                                                   \
  X(worker_actor)                                                                                  \
  X(table_setup)                                                                                   \
  X(std::vector<table_setup>)                                                                      \
  X(row_keys)                                                                                      \
  X(restored_rows)                                                                                 \
  X(table_report)                                                                                  \
  X(std::vector<table_report>)                                                                     \
  X(std::vector<step_report>)                                                                      \
  X(std::vector<step_grant>)

/// Registers every message type and the error category; call on every
/// node's config before creating the actor system.
void register_protocol(caf::actor_system_config& cfg);

/// A caf::error from a failure (category "troupe").
caf::error make_error(const failure& f);

/// The peer's refusal carried by an error of category "troupe" (its code
/// and message); none for an error that is no answer (the peer is gone, the
/// request timed out).
maybe_failure refusal_of(const caf::error& err);

/// One line for logs: "unknown_variable: no variable 'x' on ps:0" for our
/// errors, CAF's rendering for the rest.
std::string describe(const caf::error& err);

/// "actor 12 on node 5F3A...#4711" (or "an anonymous sender"): who sent the
/// message being handled, for the log line of a refusal. CAF 0.17 gives
/// actors the peer's node id, not its IP address.
std::string describe_sender(const caf::strong_actor_ptr& sender);

/// Refuses a message from the wrong party: logs "<who>: refused <what> from
/// <sender>[ at host:port]: <why>" (the address, asked of the middleman, for
/// a remote sender) and returns the unauthorized error to answer with.
caf::error refuse(const std::string& who, const std::string& what,
                  const caf::strong_actor_ptr& sender, const std::string& why);

/// The reply to a hello: the own version, or protocol_mismatch.
caf::result<uint32_t> answer_hello(uint32_t peer_version, const std::string& peer_job,
                                   int32_t peer_task, const std::string& self_name);

} // namespace troupe

CAF_ERROR_CODE_ENUM_2(troupe::errc, "troupe")
