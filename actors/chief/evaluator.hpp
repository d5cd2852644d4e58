#pragma once
// Evaluates the trained model on the test set for the chief, on an actor of
// its own, so that the chief's mailbox keeps being served meanwhile (a
// watchdog tick, a worker going down, a late report). A model with an
// embedding table has its rows pulled from the shards batch by batch, the
// way a worker pulls them (a pull never inserts, so evaluation adds no row).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <caf/typed_response_promise.hpp>

#include "actors/exchange/basp_path.hpp"
#include "actors/exchange/row_exchange.hpp"
#include "actors/protocol/protocol.hpp"
#include "tensor/data/evaluation_set.hpp"
#include "tensor/nn/metric.hpp"
#include "tensor/nn/model.hpp"

namespace troupe {

/// (every variable's value, in model order) -> mean loss, correct,
/// examples, and for binary classification with an embedding table the
/// AUC and log loss (-1, -1 otherwise).
using evaluator_actor = caf::typed_actor<caf::replies_to<evaluate_atom, std::vector<tensor>>::with<
  double, uint64_t, uint64_t, double, double>>;

struct evaluation_links {
  std::shared_ptr<model> net;
  std::shared_ptr<const evaluation_set> test;
  /// Models with an embedding table: where its rows are, and the run.
  std::vector<ps_shard_actor> shards;
  run_id run = 0;
  std::vector<table_setup> tables;
  std::chrono::milliseconds timeout{30000};
};

struct evaluator_state {
  static inline const char* name = "troupe.evaluator";
  evaluation_links links;
  std::vector<tensor> values;
  std::unique_ptr<basp_path<evaluator_actor::stateful_base<evaluator_state>>> path;
  std::unique_ptr<shard_exchange> exchange; // every shard over BASP
  std::unique_ptr<row_exchange> rows;
  std::optional<evaluation_set::reader> examples; ///< the batches not yet scored
  batch current;
  batch_rows looked_up;
  std::vector<int64_t> ids;
  tensor outputs;
  double loss_sum = 0;
  uint64_t correct = 0;
  binary_scores scores;
  caf::typed_response_promise<double, uint64_t, uint64_t, double, double> promise;
};

using evaluator_self = evaluator_actor::stateful_pointer<evaluator_state>;

/// Quits after its one answer.
evaluator_actor::behavior_type evaluator(evaluator_self self, evaluation_links links);

} // namespace troupe
