// The worker's steps: ask for a step, begin it through the worker step (its
// batch, keys and pull), compute the model on what the step pulled, hand
// the step its gradients (it checks, pushes and settles them), count and
// report it, and ask for the next; the lease says how many steps the worker
// holds at once. The reports' paths are in worker_reports.cpp.
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/worker/worker_run.hpp"
#include "tensor/core/flush_denormals.hpp"

namespace troupe::worker_run {

namespace {

// What the worker's program reported since the last step (w.report) goes
// to the chief for the final line.
void send_reported_metrics(self_ptr self) {
  auto& st = self->state;
  reported_metrics m;
  if (!st.links.net->take_reported(m.names, m.values))
    return;
  m.run = st.step->report().run;
  m.worker = st.config.index;
  self->send(st.links.chief, metrics_atom::value, std::move(m));
}

// The step's values (and rows) are in: the model computes on them.
void compute(self_ptr self) {
  auto& st = self->state;
  auto& step = *st.step;
  auto& net = *st.links.net;
  batch_stats stats;
  try {
    flush_denormals arithmetic; // the CPU model's; a GPU model's kernels are unaffected
    if (step.tables() > 0)
      stats = net.train_step_tables(step.params(), step.current(), step.all_rows(), step.grads());
    else if (step.staging())
      stats = net.train_step_staged(step.current());
    else
      stats = net.train_step(step.params(), step.current(), step.grads());
  } catch (const std::exception& e) {
    fail(self, "compute failed at step " + std::to_string(step.report().step),
         caf::make_error(caf::sec::runtime_error, e.what()));
    return;
  }
  step.computed(stats);
}

// A step's pushes are all answered: count it, then report it.
void count_and_report(self_ptr self, const step_report& report) {
  auto& st = self->state;
  auto took = st.step->took(std::chrono::steady_clock::now());
  st.metrics->step_seconds.observe(took.step_seconds);
  st.metrics->pull_seconds.observe(took.pull_seconds);
  st.metrics->push_seconds.observe(took.push_seconds);
  if (!report.applied)
    st.metrics->refused_steps.add();
  if (report.applied) {
    ++st.local_step;
    st.metrics->steps.add();
    st.metrics->examples.add(report.examples);
    st.progress.add_step(report.loss, report.correct, report.examples);
    // A declared model's program reads no data of the worker's: no accuracy to show.
    if (auto line = st.progress.take_line(st.local_step); line && !st.links.train)
      spdlog::info("{}: global_step={} local_step={} loss={:.4f} examples/s={:.0f}", st.label,
                   report.step + 1, st.local_step, line->loss, line->examples_per_sec);
    else if (line)
      spdlog::info("{}: global_step={} local_step={} loss={:.4f} {} examples/s={:.0f}", st.label,
                   report.step + 1, st.local_step, line->loss,
                   metric_text(*line, st.links.train->task == objective::regression),
                   line->examples_per_sec);
  }
  send_reported_metrics(self);
  if (!st.reports.batched())
    report_step(self, report);
  else if (st.reports.add(report, st.lease.queued()) || st.leaving)
    send_reports(self);
}

// A followed directory with nothing new (data.follow): the steps held go
// back to the chief, so that a save's fence does not wait on them, and the
// worker looks again soon, free meanwhile for the chief's messages; once a
// batch is there, it asks for steps again. True where a step may start.
bool wait_for_data(self_ptr self) {
  auto& st = self->state;
  if (st.data->ready()) {
    if (!st.gave_back)
      return true;
    st.gave_back = false;
    ask_for_first_steps(self);
    return false;
  }
  for (auto& grant : st.lease.take_all()) {
    auto back = st.step->ask();
    back.step = grant.step;
    self->send(st.links.chief, idle_atom::value, back);
    st.gave_back = true;
  }
  self->delayed_send(self, std::chrono::milliseconds(20), run_atom::value, st.lease.end());
  return false;
}

} // namespace

// With train.pull-ahead, a worker out of granted steps first collects its
// job: the step it pushed is reported (or the run could not end).
void start_next_step(self_ptr self) {
  auto& st = self->state;
  if (st.lease.busy())
    return;
  if (st.leaving) {
    if (st.step->flushable()) { // its last push is reported first
      st.lease.hold();
      st.step->flush();
      return;
    }
    if (!st.reports.empty())
      send_reports(self);
    if (!st.asked_on_line.empty())
      return; // the chief counts those steps before it sees this worker leave
    spdlog::info("{}: leaves the run after {} local step(s) (SIGTERM)", st.label, st.local_step);
    self->quit(caf::exit_reason::normal);
    return;
  }
  if (st.data && st.data->follows() && !wait_for_data(self))
    return;
  auto grant = st.lease.begin();
  if (!grant) {
    if (st.step->flushable()) {
      st.lease.hold();
      st.step->flush();
    }
    return;
  }
  st.step->begin(*grant);
}

void leave(self_ptr self) {
  auto& st = self->state;
  if (st.leaving)
    return;
  st.leaving = true;
  spdlog::info("{}: SIGTERM: leaving the run once the step under way is reported", st.label);
  start_next_step(self); // at once where none is under way
}

step_hooks hooks_of(self_ptr self) {
  step_hooks hooks;
  hooks.compute = [self] { compute(self); };
  hooks.report = [self](const step_report& report) { count_and_report(self, report); };
  // The chief decides: revoke and grant again (async) or end the run (sync,
  // where no step can complete without this worker's gradient).
  hooks.nonfinite = [self] { report_nonfinite(self); };
  // The step under way is over (reported): on to the next one held, through
  // the mailbox (a step on the bulk path runs within one handler; the next
  // one must not nest in it, and grants and losses must get their turn).
  hooks.over = [self] { self->send(self, run_atom::value, self->state.lease.end()); };
  hooks.recover = [self](const std::string& why, const std::string& error) {
    wait_for_recovery(self, why, caf::make_error(caf::sec::runtime_error, error));
  };
  hooks.fail = [self](const std::string& why, const failure& error, run_end kind) {
    fail(self, why, make_error(error), kind);
  };
  return hooks;
}

void ask_for_first_steps(self_ptr self) {
  if (self->state.reports.batched()) {
    send_reports(self); // one ask fills the whole lease
    return;
  }
  for (int32_t i = 0; i < self->state.lease.size(); ++i)
    report_step(self, self->state.step->ask());
}

} // namespace troupe::worker_run
