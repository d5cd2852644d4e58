#pragma once
// What makes a granted step a worker's to push: the chief (async) or the
// token queue (sync) signs each grant with a key of the run that only it and
// the run's shards hold (shard_options), and a shard applies a push only
// with the proof of that step for that worker. A peer that learned a bulk
// ticket, or the run id, still cannot push a step nobody granted it, or a
// step under another worker's name. The proof is SipHash-2-4 (a keyed
// pseudo-random function, 128-bit key) of (run, worker, step). Each shard
// answers a push it took with a receipt under the same key, which the
// worker's report shows its coordinator: a step reported applied without
// its pushes is found out before anything waits on it. Free of CAF.
#include <cstdint>
#include <vector>

#include "actors/protocol/messages.hpp"

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

/// Shard `shard`'s receipt for `step` of `worker` in `run`: what its answer
/// to the push carries once the step is applied there (or counted, in sync
/// mode). SipHash under the run's key like a proof, in a domain of its own,
/// so that a worker holding proofs cannot make a receipt.
uint64_t step_receipt(const grant_key& key, run_id run, int32_t worker, int64_t step,
                      int32_t shard);

/// What a coordinator asks of a report that says a step was applied: the
/// receipts of every shard a step pushes to, combined by XOR (the worker
/// combines those its pushes brought back). A worker that reports a step
/// it did not push to every shard cannot show them.
class step_receipts {
public:
  step_receipts() = default;
  /// `shards`: every shard a step pushes to (holding variables, or rows).
  step_receipts(grant_key key, run_id run, std::vector<int32_t> shards)
    : key_(key), run_(run), shards_(std::move(shards)) {}

  /// The combined receipt of `step` of `worker`.
  uint64_t of(int32_t worker, int64_t step) const {
    uint64_t out = 0;
    for (auto shard : shards_)
      out ^= step_receipt(key_, run_, worker, step, shard);
    return out;
  }
  /// Whether `r` may count: not an applied step, or one with its receipts
  /// (always with an empty key, as in tests without a chief).
  bool proven(const step_report& r) const {
    return !r.applied || r.step < 0 || key_.empty() || r.receipt == of(r.worker, r.step);
  }
  const std::vector<int32_t>& shards() const noexcept { return shards_; }

private:
  grant_key key_;
  run_id run_ = 0;
  std::vector<int32_t> shards_;
};

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
