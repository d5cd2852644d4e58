#pragma once
// What makes a granted step a worker's to push: the chief (async) or the
// token queue (sync) signs each grant with a key of the run that only it and
// the run's shards hold (shard_options), and a shard applies a push only
// with the proof of that step for that worker. A peer that learned a bulk
// ticket, or the run id, still cannot push a step nobody granted it, or a
// step under another worker's name. The proof is SipHash-2-4 (a keyed
// pseudo-random function, 128-bit key) of (run, worker, step).
#include <cstdint>

#include "actors/protocol/protocol.hpp"

namespace troupe {

/// A run's signing key; all zero: pushes are not checked (a shard made by
/// the library API without a chief, as in unit tests).
struct grant_key {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
  bool empty() const noexcept { return k0 == 0 && k1 == 0; }
  /// A fresh random key (never all zero).
  static grant_key draw();
};

/// The proof of `step` granted to `worker` in `run`.
uint64_t grant_proof(const grant_key& key, run_id run, int32_t worker, int64_t step);

/// Signs the grants a coordinator hands out.
struct grant_signer {
  grant_key key;
  run_id run = 0;
  step_grant grant(int32_t worker, int64_t step) const {
    return {step, false, grant_proof(key, run, worker, step)};
  }
  /// A grant as the ledger made it, signed for `worker` (stop needs no proof).
  step_grant sign(int32_t worker, step_grant g) const {
    if (!g.stop)
      g.proof = grant_proof(key, run, worker, g.step);
    return g;
  }
};

} // namespace troupe
