// The worker's steps: ask for a step, compute it when its values are in,
// hand the gradients to the step pipeline, count and report it, and ask for
// the next; the lease says how many steps the worker holds at once. The
// reports' paths are in worker_reports.cpp.
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

void train(self_ptr self);

// The step's batch, and where it lies in the data; false once the worker
// stops (its data failed).
bool read_batch(self_ptr self) {
  auto& st = self->state;
  try {
    st.data->next_batch(st.current);
  } catch (const std::exception& e) {
    fail(self, "reading its data failed at step " + std::to_string(st.report.step),
         caf::make_error(caf::sec::runtime_error, e.what()));
    return false;
  }
  auto position = st.data->position();
  if (st.report.share_count > 0
      && (static_cast<size_t>(st.report.share_rank) != position.share.rank
          || static_cast<size_t>(st.report.share_count) != position.share.count))
    spdlog::info("{}: epoch {} reads share {} of {} of the data", st.label, position.epoch,
                 position.share.rank, position.share.count);
  st.report.data_epoch = position.epoch;
  st.report.data_offset = position.offset;
  st.report.share_rank = static_cast<int32_t>(position.share.rank);
  st.report.share_count = static_cast<int32_t>(position.share.count);
  return true;
}

// A model with an embedding table reads its batch before the step's pull:
// the pull carries the rows of the batch's distinct ids with the values.
void begin_step(self_ptr self) {
  auto& st = self->state;
  if (st.rows) {
    if (!read_batch(self))
      return;
    st.links.net->batch_keys(st.current, st.batch_ids);
    st.looked_up.keys.assign(st.batch_ids.data(), st.batch_ids.size());
  }
  st.pipeline->begin(st.report.run);
}

// The step's values (and rows) are in. Rows are clipped to
// embedding.max-norm where set.
void compute(self_ptr self) {
  auto& st = self->state;
  st.pipeline->before_compute(st.report.run);
  if (!st.rows) {
    if (read_batch(self))
      train(self);
    return;
  }
  if (st.config.max_norm > 0)
    clip_rows(st.looked_up.values.data(), st.looked_up.keys.size(), st.links.net->tables()[0].dim,
              static_cast<float>(st.config.max_norm), st.clip_scales);
  train(self);
}

void train(self_ptr self) {
  auto& st = self->state;
  auto* staging = st.buffers.staging();
  batch_stats stats;
  try {
    flush_denormals arithmetic; // the CPU model's; a GPU model's kernels are unaffected
    if (st.rows)
      stats = st.links.net->train_step_rows(st.buffers.params(), st.current, st.looked_up,
                                            st.buffers.grads());
    else
      stats = staging
                ? st.links.net->train_step_staged(st.current)
                : st.links.net->train_step(st.buffers.params(), st.current, st.buffers.grads());
  } catch (const std::exception& e) {
    fail(self, "compute failed at step " + std::to_string(st.report.step),
         caf::make_error(caf::sec::runtime_error, e.what()));
    return;
  }
  st.report.loss = stats.loss;
  st.report.correct = stats.correct;
  st.report.examples = stats.examples;
  auto bad = staging ? st.guard->check_and_clip(*staging, stats.gradient_norm)
                     : st.guard->check_and_clip(st.buffers.grads(), stats.gradient_norm);
  if (bad)
    spdlog::warn("{}: step {}: gradient of {} is not finite (loss {}); nothing pushed", st.label,
                 st.report.step, st.links.net->variables()[*bad].name, st.report.loss);
  if (st.rows && !bad && st.config.max_norm > 0)
    clip_rows_backward(st.looked_up.values.data(), st.looked_up.keys.size(),
                       st.links.net->tables()[0].dim, st.clip_scales, st.looked_up.grads.data());
  push_header step{st.report.run, st.config.index, st.report.step, st.proof};
  st.pipeline->computed(step, st.report, !bad);
}

// A step's pushes are all answered: count it, then report it.
void count_and_report(self_ptr self, const step_report& report) {
  auto& st = self->state;
  if (report.applied) {
    ++st.local_step;
    st.progress.add_step(report.loss, report.correct, report.examples);
    if (auto line = st.progress.take_line(st.local_step))
      spdlog::info("{}: global_step={} local_step={} loss={:.4f} {} examples/s={:.0f}", st.label,
                   report.step + 1, st.local_step, line->loss,
                   metric_text(*line, st.links.train->task == objective::regression),
                   line->examples_per_sec);
  }
  if (!st.reports.batched())
    report_step(self, report);
  else if (st.reports.add(report, st.lease.queued()) || st.leaving)
    send_reports(self);
}

} // namespace

// With train.pull-ahead, a worker out of granted steps first collects its
// job: the step it pushed is reported (or the run could not end).
void start_next_step(self_ptr self) {
  auto& st = self->state;
  if (st.lease.busy())
    return;
  if (st.leaving) {
    if (st.pipeline->flushable()) { // its last push is reported first
      st.lease.hold();
      st.pipeline->flush();
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
  auto grant = st.lease.begin();
  if (!grant) {
    if (st.pipeline->flushable()) {
      st.lease.hold();
      st.pipeline->flush();
    }
    return;
  }
  st.report.step = grant->step;
  st.report.applied = false;
  st.proof = grant->proof;
  begin_step(self);
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
  hooks.fail = [self](const std::string& why, const failure& error) {
    fail(self, why, make_error(error));
  };
  return hooks;
}

void ask_for_first_steps(self_ptr self) {
  if (self->state.reports.batched()) {
    send_reports(self); // one ask fills the whole lease
    return;
  }
  for (int32_t i = 0; i < self->state.lease.size(); ++i)
    report_step(self, self->state.report);
}

} // namespace troupe::worker_run
