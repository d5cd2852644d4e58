// Sync mode on a shard: a step's gradients summed per worker until R are in
// (sync_accumulator), its rows likewise (table_store), then the mean applied
// and the token queue told; a step waits for both where the shard holds both.
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/ps/shard_run.hpp"

namespace troupe::shard_run {

// Sync mode: once R gradients of the step are in, apply their mean and tell
// the token queue that this shard reached the next step.
// With embedding tables, a step also needs every table's rows from R
// workers; a shard holding only rows completes its steps on those alone.
void apply_if_ready(self_ptr self) {
  auto& st = self->state;
  if (!st.pending)
    return;
  bool dense = !st.pending->names().empty();
  if (!dense && st.tables.empty())
    return; // holds nothing: never part of a step
  if ((dense && !st.pending->ready()) || (!st.tables.empty() && !st.tables.ready()))
    return;
  if (!st.tables.empty())
    if (auto err = st.tables.apply_step()) {
      spdlog::error("{}: could not apply the step's rows: {}", st.label, err->message);
      self->quit(make_error(*err));
      return;
    }
  auto mean = st.pending->take_average();
  if (auto err = st.store->apply_gradients(st.pending->names(), mean)) {
    // Every gradient was checked on arrival; a mean cannot fail the checks.
    spdlog::error("{}: could not apply the mean gradient: {}", st.label, err->message);
    self->quit(make_error(*err));
    return;
  }
  self->send(st.options.token_queue, applied_atom::value, st.run, st.index, st.pending->step(),
             st.pending->last_straggler_ms());
  answer_wanted_snapshot(self);
}

caf::result<int64_t> sync_push(self_ptr self, int32_t worker, int64_t step,
                               const std::vector<std::string>& names,
                               const std::vector<tensor>& gradients) {
  auto& st = self->state;
  if (auto err = st.store->check_gradients(names, gradients))
    return make_error(*err);
  auto& acc = *st.pending;
  if (names != acc.names())
    return make_error(
      {errc::invalid_request,
       "a sync push to " + st.label + " must carry every variable it holds, in the plan's order"});
  if (step >= st.options.last_step)
    return make_error({errc::training_stopped,
                       "step " + std::to_string(step) + " is past last_step on " + st.label});
  return answer_sync(self, acc.add(worker, step, gradients), "gradient", worker, step, acc.step());
}

// The answer to a sync push, dense or rows (`what`: "gradient", "rows"),
// by what the shard made of it.
caf::result<int64_t> answer_sync(self_ptr self, sync_verdict verdict, const std::string& what,
                                 int32_t worker, int64_t step, int64_t at_step) {
  auto& st = self->state;
  auto of = what + " of worker:" + std::to_string(worker) + " for step " + std::to_string(step);
  switch (verdict) {
    case sync_verdict::stale:
      return make_error({errc::stale_gradient, of + (what == "rows" ? " are" : " is")
                                                 + " stale: " + st.label + " is at step "
                                                 + std::to_string(at_step) + "; dropped"});
    case sync_verdict::ahead:
      return make_error({errc::invalid_request, "step " + std::to_string(step)
                                                  + " of worker:" + std::to_string(worker)
                                                  + " is ahead of " + st.label + " (at step "
                                                  + std::to_string(at_step) + ")"});
    case sync_verdict::duplicate:
      // A restarted worker pushing a step again: its first push counts.
      return st.store->version();
    case sync_verdict::accepted:
      apply_if_ready(self);
      return st.store->version();
  }
  return st.store->version();
}

} // namespace troupe::shard_run
