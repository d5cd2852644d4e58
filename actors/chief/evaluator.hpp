#pragma once
// Evaluates the trained model on the test set for the chief, on an actor of
// its own, so that the chief's mailbox keeps being served meanwhile (a
// watchdog tick, a worker going down, a late report).
#include <cstdint>
#include <memory>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/protocol/protocol.hpp"
#include "tensor/data/dataset.hpp"
#include "tensor/nn/model.hpp"

namespace troupe {

/// (every variable's value, in model order) -> mean loss, correct, examples.
using evaluator_actor = caf::typed_actor<
  caf::replies_to<evaluate_atom, std::vector<tensor>>::with<double, uint64_t, uint64_t>>;

/// Quits after its one answer: the chief asks once, at the end of the run.
evaluator_actor::behavior_type evaluator(evaluator_actor::pointer self, std::shared_ptr<model> net,
                                         std::shared_ptr<const dataset> test);

} // namespace troupe
