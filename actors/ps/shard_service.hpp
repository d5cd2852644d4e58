#pragma once
// One door into a ps shard, without CAF: its state (variables and slots,
// embedding tables, the update rule, a checkpoint's copy, traffic) and
// every request a peer makes of it, with the run's, the grant's and the
// request's own checks made once. The shard actor's handlers call it for
// what arrives over BASP, and the bulk endpoint for what arrives on a bulk
// connection: a pull and a fetch on the connection's thread (they only
// read, under the stores' locks), a push through the actor (the one
// writer), so that both doors answer alike.
//
// A step's push carries its dense gradients and its rows together and is
// taken as a whole: checked entirely, then applied (async) or counted
// (sync), once; its answer carries the shard's receipt for the step.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "actors/protocol/grant_proof.hpp"
#include "actors/protocol/messages.hpp"
#include "actors/ps/snapshot_copy.hpp"
#include "actors/ps/sync_accumulator.hpp"
#include "actors/ps/table_store.hpp"
#include "actors/ps/traffic_counter.hpp"
#include "actors/ps/update_rule.hpp"
#include "actors/ps/variable_store.hpp"

namespace troupe {

/// How a shard takes a run's steps: what the chief's init says.
struct shard_setup {
  bool sync = false;
  int32_t replicas = 1;   ///< sync: R
  int64_t last_step = 0;  ///< sync: no update past it
  int64_t first_step = 0; ///< a restore's
  grant_key key;          ///< empty: pushes are not checked (a shard without a chief)
  std::vector<table_setup> tables;
  int32_t shards = 1;
};

/// A pull's answer as the service gives it: the values pinned where they
/// are (BASP copies them into its reply, the bulk path writes from them).
struct pulled {
  int64_t version = 0;
  std::vector<std::shared_ptr<const tensor>> values;
  std::vector<tensor> rows;
};

/// What became of a push.
struct push_outcome {
  maybe_failure refused;  ///< nothing changed (unauthorized: a forger's, counted)
  push_receipt answer;    ///< otherwise: the version and the shard's receipt
  bool completed = false; ///< sync: this push completed the step (tell the token queue)
};

class shard_service {
public:
  /// `label` names the shard in messages ("ps:1"), `index` its receipts.
  shard_service(std::string label, int32_t index, const optimizer_config& optimizer);

  // -- the chief's control (the actor checks the sender first) --

  /// The run's first values and rules; refused if already initialised or
  /// malformed, leaving nothing held.
  maybe_failure initialize(run_id run, const std::vector<std::string>& names,
                           std::vector<tensor> values, const shard_setup& setup);
  /// Back to nothing held (a new run replaces the old one's state).
  void reset();
  /// Why a request of `run` is refused: it belongs to another run than the
  /// initialised one (none before initialisation).
  std::optional<std::string> other_run(run_id run) const { return store_.other_run(run); }
  maybe_failure restore_slot(run_id run, const std::string& key, tensor value);
  maybe_failure restore_rows(run_id run, const restored_rows& rows);
  /// The grant of `step` to `worker` was taken back: its pushes are refused.
  void revoke(int32_t worker, int64_t step);
  /// Sync: R from now on; true when that completed the step under way.
  bool set_required(int32_t required);

  // -- peers' requests, from either door --

  /// Values and rows, read as they are; thread-safe.
  maybe_failure pull(const pull_request& request, pulled& out);
  /// One step's push, taken whole or refused whole. The shard's thread only.
  /// Packed gradients are widened into storage the service keeps.
  push_outcome push(const step_push& push);
  /// A copy of the state between two updates, opened by `ticket`.
  snapshot_index take_copy(uint64_t ticket);
  /// Tensor `index` of the copy `ticket` names, for a peer of `run`, each
  /// once (the copy's version in `version`); thread-safe.
  std::variant<tensor, failure> fetch(run_id run, uint64_t ticket, int32_t index,
                                      int64_t* version = nullptr);
  /// A push naming another worker than its bulk connection's ticket.
  void unauthorized_push() { traffic_.unauthorized_push(); }

  // -- what the shard is --

  bool initialized() const noexcept { return store_.initialized(); }
  run_id run() const noexcept { return run_; }
  /// Updates applied: every step taken counts one, with or without dense
  /// variables on this shard.
  int64_t version() const noexcept { return store_.version(); }
  bool sync() const noexcept { return rule_ && rule_->is_sync(); }
  /// Sync: stale pushes dropped, and the last step's straggler time.
  uint64_t dropped() const noexcept { return rule_ ? rule_->dropped() : 0; }
  double last_straggler_ms() const noexcept { return rule_ ? rule_->last_straggler_ms() : 0; }
  /// Whether a step involves this shard: it holds variables or rows.
  bool holds_anything() const noexcept { return store_.size() > 0 || !tables_.empty(); }
  size_t variables() const noexcept { return store_.size(); }
  size_t variable_bytes() const noexcept { return store_.bytes(); }
  size_t tables() const noexcept { return tables_.size(); }
  /// The traffic and figures the chief's stats ask for.
  shard_traffic stats(int32_t shard) const;

private:
  /// A push's checks after its run's and grant's, before anything changes.
  maybe_failure check(const step_push& push, const std::vector<tensor>& gradients) const;
  /// Sync: the step's sums applied, the rule on to the next step.
  void apply_step();
  maybe_failure admit(const step_push& push);
  failure judged(push_verdict verdict, const step_push& push);
  maybe_failure take(const step_push& push, push_outcome& out);
  push_outcome refusal(failure why) const;
  static std::string step_of(const step_push& push) {
    return "step " + std::to_string(push.step) + " of worker:" + std::to_string(push.worker);
  }

  std::string label_;
  int32_t index_;
  variable_store store_;
  table_store tables_;
  std::optional<update_rule> rule_;
  std::optional<sync_accumulator> sums_; // sync: the step's dense gradients
  snapshot_copy copy_;
  traffic_counter traffic_;
  grant_key key_;
  run_id run_ = 0;
  std::vector<tensor> widened_; // a packed push's gradients at fp32, storage kept
};

} // namespace troupe
