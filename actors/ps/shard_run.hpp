#pragma once
// Internal to the shard: what its files share. ps_shard.cpp is the actor
// (its state, the dense variables' handlers, checkpoints, the chief's
// control); shard_sync.cpp applies sync mode's steps; shard_rows.cpp
// answers the embedding tables' messages (rows, push_rows, restored rows)
// and reports the tables.
#include <vector>

#include <caf/error.hpp>

#include "actors/ps/ps_shard.hpp"

namespace troupe::shard_run {

using self_ptr = ps_shard_impl::stateful_pointer<ps_shard_state>;

// -- checks and steps (ps_shard.cpp) --

/// Only the chief that initialised the shard may steer it.
caf::error unless_from_chief(self_ptr self, const char* what);
/// Reads and updates belong to the run the shard was initialised for.
caf::error unless_this_run(self_ptr self, run_id run, const char* what);
/// A push must show the proof of its step's grant to its worker.
caf::error unless_granted(self_ptr self, int32_t worker, int64_t step, uint64_t proof);
/// A snapshot waiting for this version gets it now, between two updates.
void answer_wanted_snapshot(self_ptr self);

// -- sync mode (shard_sync.cpp) --

/// Applies the step once its gradients and rows are all in.
void apply_if_ready(self_ptr self);
/// The answer to a sync push by what the shard made of it: its version, or
/// the refusal of a stale or early one. `what`: "gradient" or "rows".
caf::result<int64_t> answer_sync(self_ptr self, sync_verdict verdict, const std::string& what,
                                 int32_t worker, int64_t step, int64_t at_step);
/// A sync push of dense gradients: summed into the step, or refused.
caf::result<int64_t> sync_push(self_ptr self, int32_t worker, int64_t step,
                               const std::vector<std::string>& names,
                               const std::vector<tensor>& gradients);

// -- embedding tables (shard_rows.cpp) --

caf::result<tensor> on_rows(self_ptr self, run_id run, int32_t table, const row_keys& keys);
caf::result<int64_t> on_push_rows(self_ptr self, run_id run, int32_t worker, int64_t step,
                                  uint64_t proof, int32_t table, const row_keys& keys,
                                  const tensor& grads);
caf::result<caf::ok_atom> on_restore_rows(self_ptr self, run_id run, const restored_rows& rows);
/// Each table's part on this shard, for the chief's stats.
std::vector<table_report> table_reports(self_ptr self);

} // namespace troupe::shard_run
