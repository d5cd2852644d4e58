#pragma once
// Sync mode's token queue (TF's sync_token_q, as an actor). A worker that has
// pushed its gradients for step s reports to the queue and waits, on a
// response promise, until every shard has applied step s; then it gets a
// token carrying the new global step. A worker joining (step -1) or one whose
// step is already past gets the current step at once. No initial tokens: the
// first step is synchronised like every other. At last_step, or on stop,
// every waiting worker is released with stop. The bookkeeping is
// token_ledger's; the actor keeps the waiting replies and checks who sends
// what: reports from the workers the chief admitted, each for itself, an
// applied step's with every shard's receipt; `applied` from the run's
// shards; admit and stop from the chief.
#include <cstdint>
#include <map>
#include <vector>

#include <caf/actor_addr.hpp>

#include "actors/protocol/grant_proof.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/token_queue/token_ledger.hpp"

namespace troupe {

struct token_queue_config {
  run_id run = 0;
  int64_t last_step = 1;
  /// The shards holding variables: each reports every update.
  std::vector<caf::actor_addr> shards;
  int64_t first_step = 0; ///< a restored checkpoint's global step
  grant_key key;          ///< signs each token (grant_proof.hpp); the shards check it
  step_receipts receipts; ///< what an applied step's report must show
};

struct token_queue_state {
  static inline const char* name = "troupe.token_queue";
  token_ledger ledger{1, 1};
  run_id run = 0;
  grant_signer signer;
  step_receipts receipts;
  chief_actor chief;
  std::vector<caf::actor_addr> shards;
  std::map<int32_t, caf::actor_addr> workers; // admitted by the chief, by index
  std::vector<std::pair<int32_t, caf::typed_response_promise<step_grant>>> waiting; // by worker
  struct position {
    uint64_t epoch = 0, offset = 0;
    int32_t share_rank = 0, share_count = 0;
  };
  std::map<int32_t, position> positions; // each worker's, as last reported
};

token_queue_actor::behavior_type
token_queue(token_queue_actor::stateful_pointer<token_queue_state> self, token_queue_config config,
            chief_actor chief);

} // namespace troupe
