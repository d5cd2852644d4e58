// TensorBoard scalars from the chief (checkpoint.summaries): written into
// the log directory through tensor/summary/event_file, buffered and flushed
// by the watchdog every few seconds and when the chief quits. Nothing here
// waits: a failure to write is logged once and the summaries stop.
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include "actors/chief/chief_run.hpp"
#include "tensor/nn/metric.hpp"

namespace troupe::chief_run {

namespace {

constexpr auto flush_every = std::chrono::seconds(5);

template <class F>
void with_events(self_ptr self, F write) {
  auto& st = self->state;
  if (!st.events)
    return;
  try {
    write(*st.events);
  } catch (const std::exception& e) {
    spdlog::warn("chief: TensorBoard summaries stop: {}", e.what());
    st.events.reset();
  }
}

} // namespace

void open_summaries(self_ptr self) {
  auto& st = self->state;
  auto& c = st.config.train.checkpoint;
  if (c.log_dir.empty() || !c.summaries)
    return;
  try {
    st.events = std::make_unique<event_file>(c.log_dir);
    spdlog::info("chief: TensorBoard summaries in {} (tensorboard --logdir {})", st.events->path(),
                 c.log_dir);
  } catch (const std::exception& e) {
    spdlog::warn("chief: no TensorBoard summaries: {}", e.what());
  }
}

void summarize_progress(self_ptr self, const progress_line& line) {
  with_events(self, [&](event_file& f) {
    auto& t = self->state.config.train;
    auto step = global_step(self);
    std::vector<std::pair<std::string, float>> v{
      {"train/loss", static_cast<float>(line.loss)},
      {"train/examples_per_sec", static_cast<float>(line.examples_per_sec)},
      {"train/steps_per_sec", static_cast<float>(line.steps_per_sec)},
      {"train/learning_rate", static_cast<float>(t.optimizer.learning_rate.at(step))}};
    if (t.data.task == objective::regression)
      v.push_back({"train/rmse", static_cast<float>(rmse_of(line.loss))});
    else
      v.push_back({"train/batch_accuracy", static_cast<float>(line.batch_accuracy)});
    self->state.steps->progress_scalars(line, v);
    v.push_back({"train/workers", static_cast<float>(self->state.roster->live().size())});
    f.scalars(step, v);
  });
}

void summarize_checkpoint(self_ptr self, int64_t step, double seconds, uint64_t bytes) {
  with_events(self, [&](event_file& f) {
    f.scalars(step,
              {{"checkpoint/save_ms", static_cast<float>(seconds * 1000)},
               {"checkpoint/megabytes", static_cast<float>(static_cast<double>(bytes) / 1e6)}});
  });
}

void summarize_evaluation(self_ptr self, int64_t step, const test_score& score) {
  with_events(self, [&](event_file& f) {
    auto loss = static_cast<float>(score.loss);
    if (self->state.config.train.data.task == objective::regression)
      f.scalars(step, {{"eval/test_loss", loss},
                       {"eval/test_rmse", static_cast<float>(rmse_of(score.loss))}});
    else
      f.scalars(step, {{"eval/test_loss", loss},
                       {"eval/test_accuracy", static_cast<float>(score.accuracy())}});
    if (score.auc >= 0)
      f.scalars(step, {{"eval/test_auc", static_cast<float>(score.auc)},
                       {"eval/test_logloss", static_cast<float>(score.logloss)}});
  });
}

void summarize_progressive(self_ptr self, int64_t step, const test_score& score) {
  with_events(self, [&](event_file& f) {
    f.scalars(step, {{"eval/progressive_auc", static_cast<float>(score.auc)},
                     {"eval/progressive_logloss", static_cast<float>(score.logloss)}});
  });
}

void summarize_traffic(self_ptr self, const training_result& r) {
  with_events(self, [&](event_file& f) {
    std::vector<std::pair<std::string, float>> v;
    for (auto& s : r.traffic) {
      auto k = "ps/" + std::to_string(s.shard) + "/";
      v.push_back({k + "megabytes_in", static_cast<float>(static_cast<double>(s.bytes_in) / 1e6)});
      v.push_back(
        {k + "megabytes_out", static_cast<float>(static_cast<double>(s.bytes_out) / 1e6)});
      v.push_back({k + "pulls", static_cast<float>(s.pulls)});
      v.push_back({k + "pushes", static_cast<float>(s.pushes)});
      for (auto& t : s.tables) {
        auto e = k + "embedding/" + t.name + "/";
        v.push_back({e + "rows", static_cast<float>(t.rows)});
        v.push_back({e + "megabytes", static_cast<float>(static_cast<double>(t.bytes) / 1e6)});
        v.push_back({e + "admitted", static_cast<float>(t.admitted)});
        v.push_back({e + "evicted", static_cast<float>(t.evicted)});
      }
    }
    v.push_back({"ps/imbalance", static_cast<float>(r.ps_imbalance)});
    f.scalars(r.global_step, v);
  });
}

void flush_summaries(self_ptr self) {
  with_events(self, [](event_file& f) { f.flush_if_older_than(flush_every); });
}

void close_summaries(self_ptr self) {
  with_events(self, [](event_file& f) { f.flush(); });
  self->state.events.reset();
}

} // namespace troupe::chief_run
