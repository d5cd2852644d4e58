// The chief while training runs: placement and initialisation, the workers
// (ready, reports, losses), sync mode's updates and the watchdog. The end of
// a run is in chief_end.cpp.
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/chief_run.hpp"
#include "actors/common/fan_in.hpp"
#include "actors/token_queue/token_queue.hpp"

namespace troupe {

namespace {

using namespace chief_run;
constexpr auto watchdog_period = std::chrono::seconds(1);

void start_clock(self_ptr self) {
  auto& st = self->state;
  if (st.started)
    return;
  st.started = chief_state::clock::now();
  st.progress.restart(*st.started);
}

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

training_plan plan_message(self_ptr self) {
  return {self->state.router->plan(), self->state.coordinator};
}

void on_initialized(self_ptr self) {
  auto& st = self->state;
  if (st.now != chief_state::phase::initializing)
    return;
  st.now = chief_state::phase::training;
  if (is_sync(self)) // sync steps start now; async ones at the first grant
    start_clock(self);
  spdlog::info("chief: initialised {} variable(s) on {} shard(s); {} worker(s) waiting",
               st.router->plan().size(), st.links.shards.size(), st.waiting_ready.size());
  for (auto& rp : st.waiting_ready)
    rp.deliver(plan_message(self));
  st.waiting_ready.clear();
}

// Places the variables, then initialises every shard exactly once with
// values derived from the seed (a shard holding nothing gets an empty init).
void initialize_shards(self_ptr self) {
  auto& st = self->state;
  auto& t = st.config.train;
  auto& vars = st.links.net->variables();
  auto num_shards = static_cast<int32_t>(st.links.shards.size());
  auto placement = plan_placement(t.placement, vars, num_shards, t.placement_epsilon,
                                  t.partitioners);
  for (auto& p : placement)
    spdlog::info("chief: {} {} -> ps:{}", p.slice.name, to_string(p.slice.shape), p.shard);
  spdlog::info("chief: placement {}: imbalance of bytes held {:.3f}", name_of(t.placement),
               imbalance(placement, num_shards));
  st.router.emplace(build_plan(placement, vars), vars, num_shards);
  shard_options options;
  st.coordinator = caf::actor_cast<step_coordinator_actor>(self);
  if (is_sync(self)) {
    token_queue_config queue{static_cast<int32_t>(st.router->parts().size()), t.last_step};
    st.token_queue = self->spawn<caf::linked>(token_queue, queue,
                                              caf::actor_cast<chief_actor>(self));
    st.coordinator = st.token_queue;
    options = shard_options{true, st.config.replicas, t.last_step, st.token_queue};
    spdlog::info("chief: sync mode: averaging {} of {} workers' gradients per step",
                 st.config.replicas, st.config.num_workers);
  }
  std::vector<tensor> full; // each variable's first value, computed once
  for (auto& v : vars)
    full.push_back(initial_value(v, t.seed));
  std::vector<std::vector<std::string>> names(st.links.shards.size());
  std::vector<std::vector<tensor>> values(st.links.shards.size());
  for (auto& part : st.router->parts()) {
    names[static_cast<size_t>(part.shard)] = part.names;
    values[static_cast<size_t>(part.shard)] = st.router->cut(part, full);
  }
  auto join = make_fan_in(st.links.shards.size(), [self] { on_initialized(self); });
  for (size_t s = 0; s < st.links.shards.size(); ++s)
    self
      ->request(st.links.shards[s], st.config.runtime.request_timeout, init_atom::value,
                std::move(names[s]), std::move(values[s]), options)
      .then([join](caf::ok_atom) { join->arrive(); },
            [self, s](caf::error& err) {
              abort_run(self, "initialising ps:" + std::to_string(s) + " failed: " + describe(err));
            });
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
  using outcome = decltype(answer.what);
  switch (answer.what) {
    case outcome::granted:
      start_clock(self);
      return step_grant{answer.step, false};
    case outcome::waiting: {
      // Every remaining step is held by another worker; one may yet be
      // revoked, so this worker waits instead of leaving.
      auto rp = self->make_response_promise<step_grant>();
      st.grants->park(r.worker, rp);
      return rp;
    }
    case outcome::finished:
      finish(self);
      break;
    case outcome::diverged:
      abort_run(self, std::to_string(st.grants->refused())
                        + " updates not applied (non-finite gradients or refused pushes): "
                          "training diverged; lower train.learning-rate");
      break;
  }
  return step_grant{0, true};
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
