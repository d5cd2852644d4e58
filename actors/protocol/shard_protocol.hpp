#pragma once
// What a ps shard is told, and by whom: its first values and update rules
// from the chief that initialises it, the pulls and pushes of the run's
// workers, the chief's control.
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/protocol/token_queue_protocol.hpp"

namespace troupe {

/// How a shard applies pushes, sent with its first values.
struct shard_options {
  bool sync = false;
  int32_t replicas_to_aggregate = 1; ///< sync: gradients averaged per update (R)
  int64_t last_step = 0;             ///< sync: no update past this step
  token_queue_actor token_queue;     ///< sync: told after every update
  int64_t first_step = 0;            ///< the global step training starts at (a restore's)
  /// The run's key for grant proofs and receipts (grant_proof.hpp): a push
  /// must show the proof of its step for its worker, and its answer carries
  /// the shard's receipt. Zero: pushes are not checked.
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

/// A parameter-server shard (published). The first init makes its sender the
/// shard's chief and fixes the run; from then on it accepts pulls and pushes
/// of that run only, and replicas, stats and stop messages from that chief
/// only (exit messages only from its own process: no peer may send one).
using ps_shard_actor =
  caf::typed_actor<hello_handler,
                   // a chief, exactly once: (run, names, values, options) -> ok
                   caf::replies_to<init_atom, run_id, std::vector<std::string>, std::vector<tensor>,
                                   shard_options>::with<caf::ok_atom>,
                   // a worker or the chief of this run: the values of names (packed at the
                   // wire precision asked, tensor/core/wire_precision.hpp) and the rows of
                   // each table's keys (an unseen key's initial value; nothing is inserted)
                   // -> values, rows and version; keys another shard owns, or more than
                   // embedding.max-keys-per-request, are refused (invalid_request)
                   caf::replies_to<pull_atom, pull_request>::with<pull_reply>,
                   // a worker of this run: one step's gradients and rows, with the proof of
                   // its grant -> version and receipt. Applied once: a step applied already
                   // is answered without applying it again; sync mode answers
                   // stale_gradient for an older step; a wrong proof is refused (unauthorized)
                   caf::replies_to<push_atom, step_push>::with<push_receipt>,
                   // the chief: the grant of `step` to `worker` was taken back (it held it
                   // too long); its pushes of that step are refused from now on
                   caf::reacts_to<revoke_atom, run_id, int32_t, int64_t>,
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
                   // the chief: the run ended otherwise (a run_end, why): quit with it
                   caf::reacts_to<stop_atom, int32_t, std::string>>;

} // namespace troupe
