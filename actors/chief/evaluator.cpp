#include "actors/chief/evaluator.hpp"

#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace troupe {

namespace {

constexpr size_t rows_batch = 1000;

void fail(evaluator_self self, const std::string& why) {
  self->state.promise.deliver(
    caf::make_error(caf::sec::runtime_error, "evaluation failed: " + why));
  self->quit();
}

// One batch's outputs into the sums: log loss and AUC (binary), or squared
// error (regression).
void score_batch(evaluator_state& st) {
  auto& b = st.current;
  for (size_t e = 0; e < b.size(); ++e) {
    float y = st.outputs.data()[e];
    if (!b.targets.empty()) {
      double d = double{y} - b.targets[e];
      st.loss_sum += d * d;
      continue;
    }
    bool positive = b.labels[e] == 1;
    st.loss_sum += binary_scores::example_loss(y, positive);
    st.correct += (y > 0) == positive;
    st.scores.add_logit(y, positive);
  }
}

void next_batch(evaluator_self self) {
  auto& st = self->state;
  bool more;
  try {
    more = st.examples->next(st.current);
  } catch (const std::exception& e) {
    fail(self, e.what());
    return;
  }
  if (!more) {
    auto size = st.links.test->size();
    auto n = static_cast<double>(size);
    bool binary = !st.links.test->regression();
    st.promise.deliver(n > 0 ? st.loss_sum / n : 0.0, st.correct, size,
                       binary ? st.scores.auc() : -1.0, binary ? st.scores.logloss() : -1.0);
    self->quit();
    return;
  }
  st.links.net->batch_keys(st.current, st.ids);
  st.looked_up.keys.assign(st.ids.data(), st.ids.size());
  st.rows->pull(st.links.run, st.looked_up, [self](const row_exchange::outcome& out) {
    auto& st = self->state;
    if (out.lost || out.refused) {
      fail(self, "pulling embedding rows: " + (out.lost ? *out.lost : out.refused->message));
      return;
    }
    try {
      st.links.net->predict_rows(st.values, st.current, st.looked_up, st.outputs);
    } catch (const std::exception& e) {
      fail(self, e.what());
      return;
    }
    score_batch(st);
    next_batch(self);
  });
}

} // namespace

evaluator_actor::behavior_type evaluator(evaluator_self self, evaluation_links links) {
  self->state.links = std::move(links);
  return {
    [self](evaluate_atom,
           std::vector<tensor>& values) -> caf::result<double, uint64_t, uint64_t, double, double> {
      auto& st = self->state;
      auto& net = *st.links.net;
      if (net.tables().empty()) {
        self->quit();
        try {
          auto stats = evaluate_dataset(net, values, *st.links.test);
          return {stats.loss, static_cast<uint64_t>(stats.correct),
                  static_cast<uint64_t>(stats.examples), -1.0, -1.0};
        } catch (const std::exception& e) {
          return caf::make_error(caf::sec::runtime_error,
                                 std::string("evaluation failed: ") + e.what());
        }
      }
      if (st.links.tables.size() != 1 || st.links.shards.empty())
        return caf::make_error(caf::sec::runtime_error,
                               "evaluation failed: the model's embedding table is not placed");
      st.values = std::move(values);
      st.path = std::make_unique<basp_path<evaluator_actor::stateful_base<evaluator_state>>>(
        self, st.links.shards, st.links.timeout);
      st.exchange = std::make_unique<shard_exchange>(*st.path, st.links.timeout);
      st.exchange->reset_links(st.links.shards.size());
      st.rows = std::make_unique<row_exchange>(*st.exchange, st.links.tables[0].table,
                                               static_cast<int32_t>(st.links.shards.size()), 0,
                                               net.tables()[0].dim);
      st.promise = self->make_response_promise<double, uint64_t, uint64_t, double, double>();
      st.examples.emplace(*st.links.test, rows_batch);
      next_batch(self);
      return st.promise;
    },
  };
}

} // namespace troupe
