// The chief while training runs: progress, the watchdog, and the
// behaviour, whose reports go to the mode's step_coordination. Placement and initialisation are in chief_init.cpp, the workers
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
  spdlog::info("chief: global_step={}/{} loss={:.4f} {} examples/s={:.0f} workers={}{}",
               global_step(self), st.config.train.last_step, line->loss,
               metric_text(*line, st.config.train.data.task == objective::regression),
               line->examples_per_sec, st.roster->live().size(), st.steps->progress_text(*line));
  st.metrics.progress(line->loss, line->examples_per_sec);
  summarize_progress(self, *line);
}

void publish_metrics(self_ptr self) {
  auto& st = self->state;
  run_counts c;
  c.global_step = global_step(self);
  c.last_step = st.config.train.last_step;
  c.examples = st.examples;
  if (st.roster) {
    c.workers = st.roster->live().size();
    c.lost_workers = st.roster->lost_count();
  }
  c.expired_leases = st.steps->expired_leases();
  c.ready = st.now != chief_state::phase::initializing;
  st.metrics.publish(c, run_metrics::unix_now());
}

// Every second: fails the run when workers stay missing; after the stop,
// quits even if a shard never confirmed.
void on_tick(self_ptr self) {
  auto& st = self->state;
  auto now = chief_state::clock::now();
  flush_summaries(self);
  if (st.steps)
    publish_metrics(self);
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
  if (st.now == chief_state::phase::training) {
    st.steps->expire_leases(self);
    // Reports bring saves when they are due; a run whose workers wait for
    // data (data.follow) brings none, and what it trained before the wait
    // is saved (and becomes a serving version) here.
    if (global_step(self) != st.save.last_saved_step())
      maybe_save(self);
  }
  if (st.now != chief_state::phase::finishing) {
    if (auto why = st.steps->short_of_workers(limit, now))
      abort_run(self, *why, run_end::lost_peer);
    else if (!st.roster->live().empty())
      st.last_worker_seen = now;
    else if (now - st.last_worker_seen > limit)
      abort_run(self,
                "no worker has been connected for " + std::to_string(limit.count())
                  + " ms (cluster.worker-wait-timeout); start the workers or check their "
                    "logs",
                run_end::lost_peer);
  }
  self->delayed_send(self, watchdog_period, tick_atom::value);
}

} // namespace

namespace chief_run {

void update_counted(self_ptr self) {
  log_progress(self);
  maybe_save(self);
  maybe_evaluate(self);
}

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
  st.run = draw_run_id();
  st.signing_key = grant_key::draw();
  spdlog::info("chief: run {}", st.run);
  st.steps = st.config.train.mode == update_mode::sync ? make_sync_steps(self)
                                                       : make_async_steps(self);
  st.roster.emplace(worker_capacity(st.config.runtime, st.config.num_workers));
  st.membership.emplace(st.config.num_workers);
  st.created = st.last_worker_seen = chief_state::clock::now();
  open_report_desk(self);
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
    if (st.links.net) // else the first worker's program declares the model
      initialize_shards(self);
  } catch (const std::exception& e) {
    abort_run(self, e.what());
  }
  self->delayed_send(self, watchdog_period, tick_atom::value);
  return {
    [](hello_atom, uint32_t version, const std::string& job, int32_t task) {
      return answer_hello(version, job, task, "chief");
    },
    [self](ready_atom, int32_t index) { return on_undeclared_ready(self, index); },
    [self](ready_atom, int32_t index, model_declaration& declaration) {
      return on_declared_ready(self, index, declaration);
    },
    [self](metrics_atom, const reported_metrics& m) { on_metrics(self, m); },
    [self](report_atom, const step_report& r) { return self->state.steps->on_report(self, r); },
    [self](reports_atom, const std::vector<step_report>& rs) {
      return self->state.steps->on_reports(self, rs);
    },
    [self](nonfinite_atom, const step_report& r) {
      return self->state.steps->on_nonfinite(self, r);
    },
    [self](idle_atom, const step_report& r) { self->state.steps->on_idle(self, r); },
    [self](step_done_atom, const step_summary& s) { self->state.steps->on_step_done(self, s); },
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
    [self](relayed_atom, uint64_t key, uint64_t request, std::vector<step_report>& reports) {
      on_relayed(self, key, request, reports);
    },
  };
}

} // namespace troupe
