#pragma once
// Writes one checkpoint off the chief's mailbox: fetches the shards' copies
// one tensor at a time (so it never holds more than one) through a shard
// exchange (on the bulk path from shards in other processes that offer
// one, over BASP from the others), streams each
// shard's into its safetensors file, then commits the directory (manifest,
// rename, pointer file, keep-N). Reports to the chief with
// (saved, step, ok, path or error, bytes, seconds) and quits. Runs
// detached: disk writes block its own thread, not the chief's.
#include <chrono>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/net/bulk_client.hpp"
#include "actors/protocol/protocol.hpp"
#include "tensor/checkpoint/checkpoint.hpp"

namespace troupe {

struct checkpoint_job {
  run_id run = 0;
  std::string log_dir;
  int32_t keep = 5;
  /// Step, fingerprint, variables, update counts and data positions; the
  /// writer adds the tensors and files.
  checkpoint_manifest manifest;
  std::vector<ps_shard_actor> shards;
  bulk_peers bulk;                    ///< where the bulk path is (empty: every fetch over BASP)
  std::vector<snapshot_index> copies; ///< per shard; no names: it holds nothing
  std::vector<planned_slice> plan;
  std::vector<variable_spec> variables;
  std::chrono::milliseconds request_timeout{30000};
};

void checkpoint_writer(caf::event_based_actor* self, checkpoint_job job, caf::actor chief);

} // namespace troupe
