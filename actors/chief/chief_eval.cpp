// Evaluation while training (train.eval-interval): the chief reads the
// current values like a worker pulls them and hands them to an evaluator
// actor of its own, so its mailbox (reports, grants, the watchdog) is served
// meanwhile. Async values are read while updates go on, as TF's evaluators
// read them: an evaluation is of the model as it was around that step.
#include <cstdio>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include "actors/chief/chief_run.hpp"
#include "actors/chief/evaluator.hpp"
#include "actors/protocol/protocol.hpp"
#include "tensor/nn/metric.hpp"

namespace troupe::chief_run {

void score_on_test_set(self_ptr self, std::shared_ptr<model> net, std::vector<tensor> values,
                       std::function<void(const test_score&)> scored,
                       std::function<void(const caf::error&)> failed) {
  auto& st = self->state;
  evaluation_links links{std::move(net), st.links.test, st.links.shards,
                         st.run,         st.tables,     st.config.runtime.request_timeout};
  auto judge = st.config.detached_evaluation ? self->spawn<caf::detached>(evaluator, links)
                                             : self->spawn(evaluator, links);
  // Evaluating takes longer than any single request: ten request timeouts
  // per million examples (a streamed set is parsed again each time).
  auto millions = 1 + static_cast<int64_t>(st.links.test->size() / 1000000);
  self
    ->request(judge, st.config.runtime.request_timeout * 10 * millions, evaluate_atom::value,
              std::move(values))
    .then(
      [scored](double loss, uint64_t correct, uint64_t examples, double auc, double logloss) {
        scored({loss, correct, examples, auc, logloss});
      },
      [failed](caf::error& err) { failed(err); });
}

std::string score_text(self_ptr self, const test_score& score) {
  auto metric = metric_of(self->state.config.train.data.task, score.loss, score.correct,
                          score.examples);
  char text[160];
  if (score.auc >= 0)
    std::snprintf(text, sizeof(text), "test_auc=%.4f test_logloss=%.4f test_%s=%.4f", score.auc,
                  score.logloss, metric.name, metric.value);
  else
    std::snprintf(text, sizeof(text), "test_%s=%.4f test_loss=%.4f", metric.name, metric.value,
                  score.loss);
  return text;
}

void maybe_evaluate(self_ptr self) {
  auto& st = self->state;
  auto interval = st.config.train.eval_interval;
  if (interval <= 0 || st.evaluating || st.now != chief_state::phase::training)
    return;
  auto step = global_step(self);
  if (st.next_evaluation == 0)
    st.next_evaluation = (step / interval + 1) * interval;
  if (step < st.next_evaluation || step >= st.config.train.last_step)
    return; // the final evaluation covers the last step
  st.next_evaluation = (step / interval + 1) * interval;
  if (!st.eval_net) // its own scratch buffers: the final evaluation may overlap
    st.eval_net = make_model(st.config.train.model, model_options_of(st.config.train));
  st.evaluating = true;
  auto failed = [self, step](const std::string& why) {
    self->state.evaluating = false;
    spdlog::warn("chief: no evaluation at global_step={}: {}", step, why);
  };
  read_values(
    self,
    [self, step, failed](std::vector<tensor> values) {
      score_on_test_set(
        self, self->state.eval_net, std::move(values),
        [self, step](const test_score& score) {
          auto& st = self->state;
          st.evaluating = false;
          st.evaluations.push_back({step, score.accuracy(), score.loss, score.auc, score.logloss});
          st.metrics.evaluated(step, score.accuracy(), score.loss, score.auc, score.logloss);
          summarize_evaluation(self, step, score);
          spdlog::info("chief: evaluation at global_step={}: {} ({} examples)", step,
                       score_text(self, score), score.examples);
        },
        [failed](const caf::error& err) { failed(describe(err)); });
    },
    failed);
}

} // namespace troupe::chief_run
