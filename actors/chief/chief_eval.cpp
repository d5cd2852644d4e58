// Evaluation while training (train.eval-interval): the chief reads the
// current values like a worker pulls them and hands them to an evaluator
// actor of its own, so its mailbox (reports, grants, the watchdog) is served
// meanwhile. Async values are read while updates go on, as TF's evaluators
// read them: an evaluation is of the model as it was around that step.
#include <algorithm>
#include <cmath>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include "actors/chief/chief_run.hpp"
#include "actors/chief/evaluator.hpp"
#include "actors/protocol/protocol.hpp"
#include "tensor/nn/metric.hpp"

namespace troupe::chief_run {

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
  if (!st.eval_net)
    st.eval_net = make_model(st.config.train.model, model_options_of(st.config.train));
  st.evaluating = true;
  read_values(
    self,
    [self, step](std::vector<tensor> values) {
      auto& st = self->state;
      auto judge = st.config.detached_evaluation
                     ? self->spawn<caf::detached>(evaluator, st.eval_net, st.links.test)
                     : self->spawn(evaluator, st.eval_net, st.links.test);
      self
        ->request(judge, st.config.runtime.request_timeout * 10, evaluate_atom::value,
                  std::move(values))
        .then(
          [self, step](double loss, uint64_t correct, uint64_t examples) {
            auto& st = self->state;
            st.evaluating = false;
            double accuracy = examples ? static_cast<double>(correct) / examples : 0.0;
            st.evaluations.push_back({step, accuracy, loss});
            summarize_evaluation(self, step, accuracy, loss);
            if (st.config.train.data.task == objective::regression)
              spdlog::info("chief: evaluation at global_step={}: test_rmse={:.4f} "
                           "test_loss={:.4f} ({} examples)",
                           step, rmse_of(loss), loss, examples);
            else
              spdlog::info("chief: evaluation at global_step={}: test_accuracy={:.4f} "
                           "test_loss={:.4f} ({} examples)",
                           step, accuracy, loss, examples);
          },
          [self, step](caf::error& err) {
            self->state.evaluating = false;
            spdlog::warn("chief: the evaluation at global_step={} failed: {}", step, describe(err));
          });
    },
    [self, step](const std::string& why) {
      self->state.evaluating = false;
      spdlog::warn("chief: no evaluation at global_step={}: {}", step, why);
    });
}

} // namespace troupe::chief_run
