#pragma once
// Every atom of the Troupe protocol (at most 10 characters each), and which
// role sends it to which. docs/protocol.md lists them with their messages.
#include <caf/atom.hpp>

namespace troupe {

using hello_atom = caf::atom_constant<caf::atom("hello")>;         ///< version handshake
using init_atom = caf::atom_constant<caf::atom("init")>;           ///< chief -> shard: first values
using pull_atom = caf::atom_constant<caf::atom("pull")>;           ///< read values and rows
using push_atom = caf::atom_constant<caf::atom("push")>;           ///< apply a step
using revoke_atom = caf::atom_constant<caf::atom("revoke")>;       ///< chief -> shard: a grant back
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
using metrics_atom = caf::atom_constant<caf::atom("metrics")>;       ///< worker -> chief: w.report
using leave_atom = caf::atom_constant<caf::atom("leave")>;           ///< worker, shard: SIGTERM
using idle_atom = caf::atom_constant<caf::atom("idle")>; ///< worker -> chief: a step given back
/// The report channel's connection threads -> the chief: a batch of reports
using relayed_atom = caf::atom_constant<caf::atom("relayed")>;
/// The report channel's reader thread -> its worker: grants, or the loss of the channel
using granted_atom = caf::atom_constant<caf::atom("granted")>;

} // namespace troupe
