#pragma once
// Reading every shard part of a plan once (the chief's evaluations and its
// final values) through a shard_exchange: on the bulk path from shards in
// other processes that offer it (the shard writes its values from where
// they are: no copy, and no message buffer a connection keeps for its
// life), over BASP from the others, and over BASP again when the bulk path
// failed to bring a part. An actor of its own, so that the chief's mailbox
// stays served and the bulk path may block (spawn it detached).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/net/bulk_client.hpp"
#include "actors/protocol/protocol.hpp"
#include "tensor/plan/training_plan.hpp"

namespace troupe {

struct value_read_job {
  uint64_t run = 0;
  std::vector<ps_shard_actor> shards;
  std::vector<slice_router::shard_part> parts; ///< what to read, per shard
  bulk_peers bulk;                             ///< empty: everything over BASP
  std::chrono::milliseconds timeout{30000};    ///< per request
};

/// What a read brought: each part's values, in the order of the job's
/// parts, or why it failed (naming the shard).
struct value_read_result {
  std::vector<std::vector<tensor>> values;
  std::string error;
};

/// Answers one get_atom with ok once `into` holds the result, then quits.
caf::behavior value_reader(caf::event_based_actor* self, value_read_job job,
                           std::shared_ptr<value_read_result> into);

} // namespace troupe
