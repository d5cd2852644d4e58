// The chief while training runs: reports, sync mode's updates and the
// watchdog. Placement and initialisation are in chief_init.cpp, the workers
// (admission, losses) in chief_workers.cpp, the end of a run in chief_end.cpp.
#include <random>

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/chief_run.hpp"

namespace troupe {

namespace {

using namespace chief_run;
constexpr auto watchdog_period = std::chrono::seconds(1);

// A progress line every log-interval global steps, over the steps since the last.
void log_progress(self_ptr self) {
  auto& st = self->state;
  auto line = st.progress.take_line(global_step(self));
  if (!line)
    return;
  std::string sync_part;
  if (is_sync(self))
    sync_part = fmt::format(" straggler_ms={:.2f} dropped={} tokens={} replicas={}",
                            line->straggler_ms, line->dropped, line->tokens,
                            st.replicas->replicas());
  spdlog::info("chief: global_step={}/{} loss={:.4f} {} examples/s={:.0f} workers={}{}",
               global_step(self), st.config.train.last_step, line->loss,
               metric_text(*line, st.config.train.data.task == objective::regression),
               line->examples_per_sec, st.roster->live().size(), sync_part);
  summarize_progress(self, *line);
}

// Async: what the grant desk decided, as the worker's answer.
caf::result<step_grant>
carry_out(self_ptr self, int32_t worker,
          const grant_desk<caf::typed_response_promise<step_grant>>::answer& a) {
  using outcome = decltype(a.what);
  switch (a.what) {
    case outcome::granted:
      start_clock(self);
      return self->state.grants->grant_of(worker, a.step);
    case outcome::waiting: {
      // Every remaining step is held by another worker; one may yet be
      // revoked, so this worker waits instead of leaving.
      auto rp = self->make_response_promise<step_grant>();
      self->state.grants->park(worker, rp);
      return rp;
    }
    case outcome::finished:
      finish(self);
      break;
    case outcome::diverged:
      abort_run(self, std::to_string(self->state.grants->refused())
                        + " updates not applied (non-finite gradients or refused pushes): "
                          "training diverged; lower train.learning-rate");
      break;
  }
  return step_grant{0, true};
}

// Async: the outcome of a worker's step (a non-finite one included), then its next step.
caf::result<step_grant> on_report(self_ptr self, const step_report& r) {
  auto& st = self->state;
  if (is_sync(self))
    return make_error(
      {errc::invalid_request, "sync mode: workers report to the token queue, not the chief"});
  if (auto err = unless_admitted(self, r, "a report"))
    return err;
  if (st.now == chief_state::phase::finishing || st.now == chief_state::phase::done)
    return step_grant{0, true};
  auto answer = st.grants->report(r);
  if (answer.completed) {
    st.examples += r.examples;
    st.data_positions[r.worker] = {r.worker, r.data_epoch, r.data_offset};
    st.progress.add_step(r.loss, r.correct, r.examples);
    log_progress(self);
    maybe_save(self);
    maybe_evaluate(self);
  }
  on_grant_settled(self);
  return carry_out(self, r.worker, answer);
}

caf::result<step_grant> on_nonfinite(self_ptr self, step_report r) {
  if (auto err = unless_admitted(self, r, "a non-finite gradient"))
    return err;
  if (!is_sync(self)) {
    r.applied = false;
    return on_report(self, r);
  }
  abort_run(self, "worker:" + std::to_string(r.worker)
                    + " computed a non-finite gradient at "
                      "step "
                    + std::to_string(r.step)
                    + "; a sync step cannot complete without "
                      "it: training diverged; lower train.learning-rate");
  return step_grant{0, true};
}

// Sync: the token queue completed an update.
void on_step_done(self_ptr self, const step_summary& s) {
  auto& st = self->state;
  auto sender = self->current_sender();
  if (!st.token_queue || !sender || sender->address() != st.token_queue.address()) {
    refuse("chief", "a step_done", sender, "only its token queue reports updates");
    return;
  }
  if (st.now != chief_state::phase::training)
    return;
  st.sync_step = s.step;
  st.examples += s.examples;
  if (s.position_epochs.size() == s.position_workers.size()
      && s.position_offsets.size() == s.position_workers.size())
    for (size_t i = 0; i < s.position_workers.size(); ++i)
      st.data_positions[s.position_workers[i]] = {s.position_workers[i], s.position_epochs[i],
                                                  s.position_offsets[i]};
  st.dropped += s.dropped;
  st.progress.add_step(s.loss, s.correct, s.examples);
  st.progress.add_sync(s.straggler_ms, s.dropped, s.tokens);
  log_progress(self);
  maybe_save(self);
  maybe_evaluate(self);
  if (s.step >= st.config.train.last_step)
    finish(self);
}

// Every second: fails the run when workers stay missing; after the stop,
// quits even if a shard never confirmed.
void on_tick(self_ptr self) {
  auto& st = self->state;
  auto now = chief_state::clock::now();
  flush_summaries(self);
  auto limit = st.config.runtime.worker_wait_timeout;
  if (st.now == chief_state::phase::done) {
    quit(self);
    return;
  }
  finish_when_every_worker_came(self);
  // The reconnector may hang on a peer that accepts but never answers (a
  // frozen process): the bound is kept here.
  if (st.recovering && now - st.recovering->since > st.config.runtime.recovery_timeout) {
    on_shard_not_back(self, st.recovering->shard, "it does not answer");
    self->delayed_send(self, watchdog_period, tick_atom::value);
    return;
  }
  if (st.now != chief_state::phase::finishing) {
    if (st.replicas && st.replicas->short_for_longer_than(limit, now))
      abort_run(self, "fewer than " + std::to_string(st.config.replicas) + " workers for "
                        + std::to_string(limit.count())
                        + " ms (on-worker-loss = wait, cluster.worker-wait-timeout); restart the "
                          "lost workers, or use on-worker-loss = \"shrink\"");
    else if (!st.roster->live().empty())
      st.last_worker_seen = now;
    else if (now - st.last_worker_seen > limit)
      abort_run(self, "no worker has been connected for " + std::to_string(limit.count())
                        + " ms (cluster.worker-wait-timeout); start the workers or check their "
                          "logs");
  }
  self->delayed_send(self, watchdog_period, tick_atom::value);
}

} // namespace

namespace chief_run {

run_id draw_run_id() {
  std::random_device entropy;
  auto high = static_cast<run_id>(entropy()) << 32;
  auto id = high | entropy();
  return id ^ static_cast<run_id>(chief_state::clock::now().time_since_epoch().count());
}

} // namespace chief_run

namespace {

using namespace chief_run;

// The run's identity, where it starts (a checkpoint's step and data
// positions, or 0), and the coordination of its mode.
void set_up_run(self_ptr self) {
  auto& st = self->state;
  st.progress = progress_meter{st.config.train.log_interval};
  open_summaries(self);
  if (auto& ckpt = st.links.restore_from) {
    st.first_step = ckpt->manifest().step;
    st.save.restored_at(st.first_step); // the checkpoint holds it already
    for (auto& p : ckpt->manifest().data)
      st.data_positions[p.worker] = p;
  }
  if (auto& c = st.config.train.checkpoint; !c.log_dir.empty())
    st.schedule.emplace(c.save_interval, c.save_steps, st.first_step, chief_state::clock::now());
  if (st.config.train.mode == update_mode::sync)
    st.replicas.emplace(st.config.train.on_worker_loss, st.config.replicas, st.config.num_workers);
  st.run = draw_run_id();
  st.signing_key = grant_key::draw();
  spdlog::info("chief: run {}", st.run);
  if (!st.replicas)
    st.grants.emplace(st.config.train.last_step, st.config.runtime.max_refused_steps, st.first_step,
                      async_step_lease(st.config.train.pull_ahead),
                      grant_signer{st.signing_key, st.run});
  st.sync_step = st.first_step;
  st.roster.emplace(st.config.num_workers);
  st.created = st.last_worker_seen = chief_state::clock::now();
}

void on_down(self_ptr self, const caf::down_msg& msg) {
  auto& st = self->state;
  for (size_t s = 0; s < st.links.shards.size(); ++s)
    if (msg.source == st.links.shards[s].address())
      return on_shard_down(self, s, msg.reason);
  if (auto index = st.roster->leave(msg.source))
    on_worker_down(self, *index, msg.reason);
}

// An evaluator asks where the checkpoints are served.
caf::result<checkpoint_source_actor> on_follow(self_ptr self) {
  if (!self->state.links.checkpoints)
    return make_error({errc::invalid_request,
                       "this chief serves no checkpoints (it has no checkpoint.log-dir, or "
                       "runs inside a library topology)"});
  return self->state.links.checkpoints;
}

// SIGTERM, relayed by the chief's own process.
void on_stop(self_ptr self) {
  auto sender = self->current_sender();
  if (!sender || sender->node() != self->node()) {
    refuse("chief", "a stop", sender, "only its own process (SIGTERM) stops the chief");
    return;
  }
  on_preempted(self);
}

} // namespace

chief_impl::behavior_type chief(chief_impl::stateful_pointer<chief_state> self, chief_config config,
                                chief_links links) {
  auto& st = self->state;
  st.config = std::move(config);
  st.links = std::move(links);
  set_up_run(self);
  for (auto& shard : st.links.shards)
    self->monitor(shard);
  self->set_down_handler([self](const caf::down_msg& msg) { on_down(self, msg); });
  try {
    initialize_shards(self);
  } catch (const std::exception& e) {
    abort_run(self, e.what());
  }
  self->delayed_send(self, watchdog_period, tick_atom::value);
  return {
    [](hello_atom, uint32_t version, const std::string& job, int32_t task) {
      return answer_hello(version, job, task, "chief");
    },
    [self](ready_atom, int32_t index) { return on_ready(self, index); },
    [self](report_atom, const step_report& r) { return on_report(self, r); },
    [self](nonfinite_atom, const step_report& r) { return on_nonfinite(self, r); },
    [self](step_done_atom, const step_summary& s) { on_step_done(self, s); },
    [self](tick_atom) { on_tick(self); },
    [self](saved_atom, int64_t step, bool ok, const std::string& what, uint64_t bytes,
           double seconds) { on_saved(self, step, ok, what, bytes, seconds); },
    [self](shard_back_atom, int32_t shard, ps_shard_actor& handle) {
      on_shard_back(self, shard, std::move(handle));
    },
    [self](shard_back_atom, int32_t shard, const std::string& why) {
      on_shard_not_back(self, shard, why);
    },
    [self](follow_atom) { return on_follow(self); },
    [self](stop_atom) { on_stop(self); },
  };
}

} // namespace troupe
