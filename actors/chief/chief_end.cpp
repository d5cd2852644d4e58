// The end of a run: final values, evaluation off the chief's mailbox, the
// shards' traffic, the result, and stopping every task.
#include <algorithm>
#include <cmath>

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/chief_run.hpp"
#include "actors/common/fan_in.hpp"
#include "tensor/nn/metric.hpp"

namespace troupe::chief_run {

namespace {

double seconds_since(chief_state::clock::time_point t) {
  return std::chrono::duration<double>(chief_state::clock::now() - t).count();
}

training_result base_result(self_ptr self) {
  auto& st = self->state;
  training_result r;
  r.wall_seconds = seconds_since(st.created);
  r.mode = st.config.train.mode;
  r.task = st.config.train.data.task;
  r.global_step = global_step(self);
  r.examples = st.examples;
  r.refused_steps = st.steps->refused();
  r.dropped_gradients = st.steps->dropped();
  r.lost_workers = st.roster->lost_count();
  r.left_workers = st.left_workers;
  r.dropped_workers = st.dropped_workers;
  r.expired_leases = st.steps->expired_leases();
  r.evaluations = st.evaluations;
  r.evaluated = !declared_run(self); // its program evaluates a declared model
  r.reported = st.reported;
  return r;
}

// A finished run stops every task with exit code 0; one that ended
// otherwise tells them how (a run_end) and why, and they quit with it so
// that their processes exit with the same code. The chief quits once every
// shard confirmed (went down) or at the next watchdog tick, so the stop
// messages have left this process.
void stop_everyone(self_ptr self, run_end end, const std::string& why) {
  auto& st = self->state;
  st.now = chief_state::phase::done;
  st.exit_reason = end_error(end, why);
  bool failed = end != run_end::done;
  st.steps->stop(self, failed);
  auto stop = [&](const auto& handle) {
    if (failed)
      self->send(handle, stop_atom::value, static_cast<int32_t>(end), why);
    else
      self->send(handle, stop_atom::value);
  };
  for (auto& shard : st.links.shards)
    stop(shard);
  for (auto& entry : st.roster->live())
    if (auto w = caf::actor_cast<worker_actor>(entry.second))
      stop(w);
  if (st.shards_down >= st.links.shards.size())
    quit(self);
}

void report_and_stop(self_ptr self, const training_result& r) {
  if (self->state.links.on_finish)
    self->state.links.on_finish(r);
  stop_everyone(self, r.ended(), r.error);
}

// The final line may say ok only if the run is what the chief counted: every
// shard a step pushes to (holding variables, or rows) applied exactly the
// updates the chief counted (a fake worker's reports or a partial update
// show here), the others none, and no worker failed of an error of its own.
void verify(self_ptr self, training_result& r) {
  auto& st = self->state;
  if (!r.ok)
    return;
  auto problems = st.roster->failures();
  if (!st.save.final_error().empty())
    problems.push_back("the final checkpoint could not be written: " + st.save.final_error());
  std::vector<bool> holds(st.links.shards.size(), false);
  for (auto shard : st.receipts.shards())
    holds[static_cast<size_t>(shard)] = true;
  for (size_t s = 0; s < holds.size(); ++s) {
    auto t = std::find_if(r.traffic.begin(), r.traffic.end(), [&](const shard_traffic& x) {
      return x.shard == static_cast<int32_t>(s);
    });
    auto expected = holds[s] ? r.global_step : 0;
    if (t == r.traffic.end())
      problems.push_back("ps:" + std::to_string(s) + " did not report the updates it applied");
    else if (t->updates != expected)
      problems.push_back("ps:" + std::to_string(s) + " applied " + std::to_string(t->updates)
                         + " update(s), but the chief counted " + std::to_string(expected));
  }
  if (problems.empty())
    return;
  r.ok = false;
  for (auto& p : problems)
    r.error += (r.error.empty() ? "" : "; ") + p;
  spdlog::error("chief: the run cannot report success: {}", r.error);
}

// Asks every shard for its traffic, logs the table, checks the result, then
// reports. A shard that does not answer leaves its row out.
void collect_traffic_and_report(self_ptr self, training_result r) {
  auto& st = self->state;
  auto result = std::make_shared<training_result>(std::move(r));
  auto join = make_fan_in(st.links.shards.size(), [self, result] {
    troupe::summarize_traffic(*result);
    chief_run::summarize_traffic(self, *result);
    for (auto& line : traffic_table(*result))
      spdlog::info("chief: {}", line);
    save_final_then(self, [self, result] {
      verify(self, *result);
      report_and_stop(self, *result);
    });
  });
  for (auto& shard : st.links.shards)
    self->request(shard, st.config.runtime.request_timeout, stats_atom::value)
      .then(
        [result, join](shard_traffic& t) {
          result->traffic.push_back(std::move(t));
          join->arrive();
        },
        [join](caf::error&) { join->arrive(); });
}

// The final values scored on the test set, then the result reported.
void evaluate(self_ptr self, std::vector<tensor> values, double train_seconds) {
  auto& st = self->state;
  auto r = std::make_shared<training_result>(base_result(self));
  r->examples_per_sec = train_seconds > 0 ? static_cast<double>(st.examples) / train_seconds : 0;
  for (auto& v : st.links.net->variables())
    r->variables.push_back(v.name);
  r->values = values;
  if (declared_run(self)) { // its program evaluates it: the final line carries what it reported
    r->ok = true;
    r->wall_seconds = seconds_since(st.created);
    spdlog::info("chief: done: global_step={} examples/s={:.0f} (a declared model: its "
                 "workers' programs evaluate it)",
                 r->global_step, r->examples_per_sec);
    collect_traffic_and_report(self, std::move(*r));
    return;
  }
  score_on_test_set(
    self, st.links.net, std::move(values),
    [self, r](const test_score& score) {
      r->ok = true;
      r->test_loss = score.loss;
      r->test_accuracy = score.accuracy();
      r->test_auc = score.auc;
      r->test_logloss = score.logloss;
      r->wall_seconds = seconds_since(self->state.created);
      summarize_evaluation(self, r->global_step, score);
      spdlog::info("chief: done: global_step={} {} examples/s={:.0f}", r->global_step,
                   score_text(self, score), r->examples_per_sec);
      collect_traffic_and_report(self, std::move(*r));
    },
    [self, r](const caf::error& err) {
      r->values.clear();
      r->variables.clear();
      r->error = describe(err);
      collect_traffic_and_report(self, std::move(*r));
    });
}

} // namespace

void finish(self_ptr self) {
  auto& st = self->state;
  st.now = chief_state::phase::finishing;
  st.steps->finishing(); // nothing left to wait for
  double train_seconds = st.started ? seconds_since(*st.started) : 0.0;
  if (st.links.test)
    spdlog::info("chief: reached last_step {}; evaluating on {} test examples",
                 st.config.train.last_step, st.links.test->size());
  else
    spdlog::info("chief: reached last_step {}", st.config.train.last_step);
  read_values(
    self,
    [self, train_seconds](std::vector<tensor> values) {
      evaluate(self, std::move(values), train_seconds);
    },
    [self](const std::string& why) { abort_run(self, "reading the final values: " + why); });
}

void stop_preempted(self_ptr self, const std::string& why) {
  auto& st = self->state;
  auto r = base_result(self);
  r.preempted = true;
  r.error = (why.empty() ? "stopped by SIGTERM at step " + std::to_string(r.global_step) : why)
            + "; "
            + (!st.schedule ? std::string("checkpoints are off (checkpoint.log-dir)")
               : st.save.final_error().empty()
                 ? "checkpoint saved at step " + std::to_string(st.save.last_saved_step())
                     + "; start the job again to continue from it"
                 : "no checkpoint was saved (" + st.save.final_error()
                     + "); a restart begins from the latest one there is");
  spdlog::warn("chief: {}", r.error);
  if (st.links.on_finish)
    st.links.on_finish(r);
  stop_everyone(self, run_end::preempted, r.error);
}

void abort_run(self_ptr self, const std::string& why, run_end kind) {
  auto& st = self->state;
  if (st.now == chief_state::phase::done)
    return;
  spdlog::error("chief: training failed ({}): {}", name_of(kind), why);
  auto r = base_result(self);
  r.error = why;
  r.failure = kind;
  report_and_stop(self, r);
}

void on_shard_down(self_ptr self, size_t shard, const caf::error& reason) {
  auto& st = self->state;
  ++st.shards_down;
  if (st.now == chief_state::phase::done) {
    if (st.shards_down == st.links.shards.size())
      quit(self);
    return;
  }
  if (st.now == chief_state::phase::finishing) {
    // The final values are being read or were: a failed read aborts the run.
    spdlog::warn("chief: lost ps:{} ({}) while finishing", shard, self->system().render(reason));
    return;
  }
  if (st.now == chief_state::phase::training) {
    on_shard_lost(self, shard, reason);
    return;
  }
  abort_run(self,
            "lost ps:" + std::to_string(shard) + " (" + self->system().render(reason)
              + (st.recovering ? ") while recovering ps:" + std::to_string(st.recovering->shard)
                               : "); its variables are gone"),
            run_end::lost_peer);
}

void quit(self_ptr self) {
  auto& st = self->state;
  close_summaries(self);
  st.steps->quit(self);
  self->quit(st.exit_reason);
}

} // namespace troupe::chief_run
