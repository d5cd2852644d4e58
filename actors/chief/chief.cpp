// The chief while training runs: the workers (ready, reports, losses), sync
// mode's updates and the watchdog. Placement and initialisation are in
// chief_init.cpp, the end of a run in chief_end.cpp.
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
  spdlog::info("chief: global_step={}/{} loss={:.4f} batch_accuracy={:.4f} examples/s={:.0f} "
               "workers={}{}",
               global_step(self), st.config.train.last_step, line->loss, line->batch_accuracy,
               line->examples_per_sec, st.workers.size(), sync_part);
}

// Sync: logs and carries out what a lost or returning worker changed.
void carry_out(self_ptr self, const replica_policy::change& c) {
  auto& st = self->state;
  auto& policy = *st.replicas;
  if (c.became_short)
    spdlog::warn("chief: {} of {} needed workers available; holding step {} until a lost worker "
                 "restarts (on-worker-loss = wait, at most {} ms)",
                 policy.available(), policy.configured(), st.sync_step,
                 st.config.runtime.worker_wait_timeout.count());
  if (c.enough_again)
    spdlog::info("chief: enough workers again; step {} goes on", st.sync_step);
  if (!c.replicas)
    return;
  spdlog::warn("chief: averaging {} gradient(s) per step from now on (was {}; {} worker(s) lost, "
               "on-worker-loss = shrink)",
               *c.replicas, c.previous, policy.lost_count());
  for (auto& shard : st.links.shards)
    self->send(shard, replicas_atom::value, *c.replicas);
}

void register_worker(self_ptr self, int32_t index) {
  auto& st = self->state;
  if (st.workers.count(index) > 0)
    spdlog::warn("chief: worker:{} registered again (restarted?)", index);
  if (auto w = caf::actor_cast<caf::actor>(self->current_sender())) {
    st.workers[index] = w.address();
    self->monitor(w);
  }
  if (st.replicas && st.replicas->was_lost(index)) {
    spdlog::info("chief: worker:{} rejoined at step {}", index, st.sync_step);
    carry_out(self, st.replicas->joined(index));
  }
}

void on_worker_down(self_ptr self, int32_t index, const caf::error& reason) {
  auto& st = self->state;
  st.workers.erase(index);
  st.last_worker_seen = chief_state::clock::now();
  bool running = st.now == chief_state::phase::initializing
                 || st.now == chief_state::phase::training;
  if (is_sync(self)) {
    if (running) {
      spdlog::warn("chief: lost worker:{} ({}); {} worker(s) left; a restarted worker rejoins",
                   index, self->system().render(reason), st.workers.size());
      carry_out(self, st.replicas->lost(index));
    }
    return;
  }
  st.grants->lose(index);
  if (!reason || reason == caf::exit_reason::normal)
    spdlog::info("chief: worker:{} finished", index);
  else if (running)
    spdlog::warn("chief: lost worker:{} ({}); its step goes to the others, {} worker(s) left; a "
                 "restarted worker rejoins",
                 index, self->system().render(reason), st.workers.size());
}

caf::result<training_plan> on_ready(self_ptr self, int32_t index) {
  auto& st = self->state;
  register_worker(self, index);
  if (st.now != chief_state::phase::initializing && st.router)
    return plan_message(self);
  if (st.now != chief_state::phase::initializing)
    return make_error({errc::training_stopped, "the run ended before it was initialised"});
  auto rp = self->make_response_promise<training_plan>();
  st.waiting_ready.push_back(rp);
  return rp;
}

// Async: what the grant desk decided, as the worker's answer.
caf::result<step_grant>
carry_out(self_ptr self, int32_t worker,
          const grant_desk<caf::typed_response_promise<step_grant>>::answer& a) {
  using outcome = decltype(a.what);
  switch (a.what) {
    case outcome::granted:
      start_clock(self);
      return step_grant{a.step, false};
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
  if (st.now == chief_state::phase::finishing || st.now == chief_state::phase::done)
    return step_grant{0, true};
  auto answer = st.grants->report(r);
  if (answer.completed) {
    st.examples += r.examples;
    st.progress.add_step(r.loss, r.correct, r.examples);
    log_progress(self);
  }
  return carry_out(self, r.worker, answer);
}

caf::result<step_grant> on_nonfinite(self_ptr self, step_report r) {
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
  if (st.now != chief_state::phase::training)
    return;
  st.sync_step = s.step;
  st.examples += s.examples;
  st.dropped += s.dropped;
  st.progress.add_step(s.loss, s.correct, s.examples);
  st.progress.add_sync(s.straggler_ms, s.dropped, s.tokens);
  log_progress(self);
  if (s.step >= st.config.train.last_step)
    finish(self);
}

// Every second: fails the run when workers stay missing; after the stop,
// quits even if a shard never confirmed.
void on_tick(self_ptr self) {
  auto& st = self->state;
  auto now = chief_state::clock::now();
  auto limit = st.config.runtime.worker_wait_timeout;
  if (st.now == chief_state::phase::done) {
    quit(self);
    return;
  }
  if (st.now != chief_state::phase::finishing) {
    if (st.replicas && st.replicas->short_for_longer_than(limit, now))
      abort_run(self, "fewer than " + std::to_string(st.config.replicas) + " workers for "
                        + std::to_string(limit.count())
                        + " ms (on-worker-loss = wait, cluster.worker-wait-timeout); restart the "
                          "lost workers, or use on-worker-loss = \"shrink\"");
    else if (!st.workers.empty())
      st.last_worker_seen = now;
    else if (now - st.last_worker_seen > limit)
      abort_run(self, "no worker has been connected for " + std::to_string(limit.count())
                        + " ms (cluster.worker-wait-timeout); start the workers or check their "
                          "logs");
  }
  self->delayed_send(self, watchdog_period, tick_atom::value);
}

} // namespace

chief_impl::behavior_type chief(chief_impl::stateful_pointer<chief_state> self, chief_config config,
                                chief_links links) {
  auto& st = self->state;
  st.config = std::move(config);
  st.links = std::move(links);
  st.progress = progress_meter{st.config.train.log_interval};
  if (st.config.train.mode == update_mode::sync)
    st.replicas.emplace(st.config.train.on_worker_loss, st.config.replicas, st.config.num_workers);
  else
    st.grants.emplace(st.config.train.last_step, st.config.runtime.max_refused_steps);
  st.created = st.last_worker_seen = chief_state::clock::now();
  for (auto& shard : st.links.shards)
    self->monitor(shard);
  self->set_down_handler([self](const caf::down_msg& msg) {
    auto& st = self->state;
    for (size_t s = 0; s < st.links.shards.size(); ++s)
      if (msg.source == st.links.shards[s].address())
        return on_shard_down(self, s, msg.reason);
    for (auto& [index, address] : st.workers)
      if (address == msg.source)
        return on_worker_down(self, index, msg.reason);
  });
  try {
    initialize_shards(self);
  } catch (const std::exception& e) {
    abort_run(self, e.what());
  }
  self->delayed_send(self, watchdog_period, tick_atom::value);
  return {
    [self](hello_atom, uint32_t version, const std::string& job, int32_t task) {
      return answer_hello(version, job, task, "chief");
    },
    [self](ready_atom, int32_t index) { return on_ready(self, index); },
    [self](report_atom, const step_report& r) { return on_report(self, r); },
    [self](nonfinite_atom, const step_report& r) { return on_nonfinite(self, r); },
    [self](step_done_atom, const step_summary& s) { on_step_done(self, s); },
    [self](tick_atom) { on_tick(self); },
  };
}

} // namespace troupe
