#pragma once
// Sync mode's token queue (TF's sync_token_q, as an actor). A worker that has
// pushed its gradients for step s reports to the queue and waits, on a
// response promise, until every shard has applied step s; then it gets a
// token carrying the new global step. A worker joining (step -1) or one whose
// step is already past gets the current step at once. No initial tokens: the
// first step is synchronised like every other. At last_step, or on stop,
// every waiting worker is released with stop.
#include <cstdint>
#include <map>
#include <vector>

#include "actors/protocol/protocol.hpp"

namespace troupe {

struct token_queue_config {
  int32_t shards = 1;     ///< shards holding variables: each reports every update
  int64_t last_step = 1;
};

struct token_queue_state {
  static inline const char* name = "troupe.token_queue";
  token_queue_config config;
  chief_actor chief;
  int64_t global_step = 0;
  bool stopped = false;
  std::map<int64_t, std::vector<double>> applied;  // step reached -> straggler ms per shard
  std::vector<caf::typed_response_promise<step_grant>> waiting;
  // statistics of the step in progress
  double loss_sum = 0;
  uint64_t applied_reports = 0;
  uint64_t correct = 0;
  uint64_t examples = 0;
  uint64_t dropped = 0;
  uint64_t tokens = 0;     // released since the last update, at once or on it
};

token_queue_actor::behavior_type
token_queue(token_queue_actor::stateful_pointer<token_queue_state> self,
            token_queue_config config, chief_actor chief);

} // namespace troupe
