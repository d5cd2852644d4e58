#pragma once
// A worker's step reports, for the tests of the step bookkeeping (token
// ledger, grant desk, token queue, shards). Only the protocol's types: the
// CAF-free tests include it as well as the actor tests.
#include <cstdint>

#include "actors/protocol/protocol.hpp"

namespace troupe::testing {

/// The run tests initialise shards for.
constexpr run_id test_run = 7;

/// Worker `worker`'s report of `step` (-1: it only asks for a step) in run
/// test_run: 4 examples, one of them correct, mean loss `loss`.
inline step_report report(int32_t worker, int64_t step, bool applied = true, double loss = 1.0) {
  step_report r;
  r.run = test_run;
  r.worker = worker;
  r.step = step;
  r.applied = applied;
  r.loss = loss;
  r.correct = 1;
  r.examples = 4;
  return r;
}

} // namespace troupe::testing
