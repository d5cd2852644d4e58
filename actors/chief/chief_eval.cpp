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
#include "tensor/data/follow_reader.hpp"
#include "tensor/nn/metric.hpp"

namespace troupe::chief_run {

namespace {

void score_on(self_ptr self, std::shared_ptr<const evaluation_set> set, std::shared_ptr<model> net,
              std::vector<tensor> values, std::function<void(const test_score&)> scored,
              std::function<void(const caf::error&)> failed) {
  auto& st = self->state;
  evaluation_links links{std::move(net), set,       st.links.shards,
                         st.run,         st.tables, st.config.runtime.request_timeout};
  auto judge = st.config.detached_evaluation ? self->spawn<caf::detached>(evaluator, links)
                                             : self->spawn(evaluator, links);
  // Evaluating takes longer than any single request: ten request timeouts
  // per million examples (a streamed set is parsed again each time).
  auto millions = 1 + static_cast<int64_t>(set->size() / 1000000);
  self
    ->request(judge, st.config.runtime.request_timeout * 10 * millions, evaluate_atom::value,
              std::move(values))
    .then(
      [scored](double loss, uint64_t correct, uint64_t examples, double auc, double logloss) {
        scored({loss, correct, examples, auc, logloss});
      },
      [failed](caf::error& err) { failed(err); });
}

// data.follow: the newest file of the stream no worker has begun, scored
// with the values of this evaluation before it is trained on (progressive
// validation); logged and written to TensorBoard as eval/progressive_*.
void score_progressive(self_ptr self, int64_t step, std::vector<tensor> values) {
  auto& st = self->state;
  auto& data = st.config.train.data;
  if (!data.follow || data.train.empty() || !st.links.test || st.progressive_net == nullptr)
    return;
  std::vector<uint64_t> reading(static_cast<size_t>(std::max(st.config.num_workers, 1)), 0);
  for (auto& [worker, position] : st.data_positions)
    if (worker >= 0 && static_cast<size_t>(worker) < reading.size())
      reading[static_cast<size_t>(worker)] = position.epoch;
  auto file = next_unread_file(data.train.front(), reading);
  if (!file)
    return; // the workers have caught up: nothing unseen to score
  std::shared_ptr<const evaluation_set> set;
  try {
    set = std::make_shared<const evaluation_set>(split_of_file(*st.links.test->split(), *file),
                                                 uint64_t{1} << 30);
  } catch (const std::exception& e) {
    spdlog::warn("chief: no progressive validation on {}: {}", *file, e.what());
    return;
  }
  score_on(
    self, set, st.progressive_net, std::move(values),
    [self, step, file](const test_score& score) {
      if (score.auc < 0)
        return;
      spdlog::info("chief: progressive validation at global_step={}: auc={:.4f} logloss={:.4f} "
                   "on {} ({} examples, not yet trained on)",
                   step, score.auc, score.logloss, *file, score.examples);
      summarize_progressive(self, step, score);
    },
    [file](const caf::error& err) {
      spdlog::warn("chief: no progressive validation on {}: {}", *file, describe(err));
    });
}

} // namespace

void score_on_test_set(self_ptr self, std::shared_ptr<model> net, std::vector<tensor> values,
                       std::function<void(const test_score&)> scored,
                       std::function<void(const caf::error&)> failed) {
  score_on(self, self->state.links.test, std::move(net), std::move(values), std::move(scored),
           std::move(failed));
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
  if (st.config.train.data.follow && !st.progressive_net)
    st.progressive_net = make_model(st.config.train.model, model_options_of(st.config.train));
  st.evaluating = true;
  auto failed = [self, step](const std::string& why) {
    self->state.evaluating = false;
    spdlog::warn("chief: no evaluation at global_step={}: {}", step, why);
  };
  read_values(
    self,
    [self, step, failed](std::vector<tensor> values) {
      score_progressive(self, step, values);
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
