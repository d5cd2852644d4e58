#include "actors/worker/worker.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/common/fan_in.hpp"
#include "actors/exchange/basp_path.hpp"

namespace troupe {

namespace {

using self_ptr = worker_impl::stateful_pointer<worker_state>;

void fail(self_ptr self, const std::string& what, const caf::error& err) {
  spdlog::error("{}: {}: {}; stopping this worker", self->state.label, what, describe(err));
  self->quit(err);
}

bool can_recover(self_ptr self) {
  auto& st = self->state;
  return static_cast<bool>(st.links.reconnect) && st.config.recovery_timeout.count() > 0;
}

// A peer is gone or a request of the run failed: the chief restores the run
// and sends a new plan (a lost shard), or the worker finds the restarted
// chief (a lost chief). What the step had under way is void from here.
void wait_for_recovery(self_ptr self, const std::string& why, const caf::error& err) {
  auto& st = self->state;
  if (!can_recover(self)) {
    fail(self, why, err);
    return;
  }
  ++st.generation;
  st.pipeline->drop();
  if (st.waiting_since) {
    spdlog::info("{}: while waiting, also {}: {}", st.label, why, describe(err));
    return;
  }
  st.waiting_since = std::chrono::steady_clock::now();
  spdlog::warn("{}: {}: {}; waiting up to {} ms for the run to recover (cluster.recovery-timeout)",
               st.label, why, describe(err), st.config.recovery_timeout.count());
  self->delayed_send(self, st.config.recovery_timeout, tick_atom::value);
}

// Reconnects to the shards lost since the last plan; false (logged) if one
// stays away.
bool reconnect_lost_shards(self_ptr self) {
  auto& st = self->state;
  for (auto shard : st.lost_shards) {
    auto back = st.links.reconnect.shard(shard, st.config.recovery_timeout);
    if (!back) {
      fail(self, "ps:" + std::to_string(shard) + " did not come back", back.error());
      return false;
    }
    st.links.shards[static_cast<size_t>(shard)] = *back;
    self->monitor(*back);
  }
  st.lost_shards.clear();
  return true;
}

template <class Source>
bool from_chief_or_here(self_ptr self, const Source& source) {
  if (!source)
    return false;
  caf::actor_addr addr = caf::actor_cast<caf::actor_addr>(source);
  return addr == self->state.links.chief.address() || addr.node() == self->node();
}

void on_grant(self_ptr self, const step_grant& grant);

// Reports the last step to `to`; the answer (the next step) arrives while
// the worker computes a step it holds already, if any.
template <class Atom, class Handle>
void ask_for_step(self_ptr self, const Handle& to, const step_report& report) {
  auto& st = self->state;
  self->request(to, st.config.step_timeout, Atom::value, report)
    .then(
      [self, gen = st.generation](const step_grant& grant) {
        if (self->state.generation == gen)
          on_grant(self, grant);
      },
      [self, gen = st.generation](caf::error& err) {
        if (self->state.generation == gen)
          wait_for_recovery(self, "waiting for the next step failed", err);
      });
}

// Starts the next granted step, unless one is under way or none is granted.
// With train.pull-ahead, a worker out of granted steps first collects its
// job: the step it pushed is reported (or the run could not end).
void start_next_step(self_ptr self) {
  auto& st = self->state;
  if (st.lease.busy())
    return;
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
  st.pipeline->begin(st.report.run);
}

// The answer to a report: a step to compute (now, or after the one under
// way), or stop.
void on_grant(self_ptr self, const step_grant& grant) {
  auto& st = self->state;
  if (grant.stop) {
    spdlog::info("{}: stop after {} local step(s)", st.label, st.local_step);
    self->quit(caf::exit_reason::normal);
    return;
  }
  st.lease.grant(grant);
  start_next_step(self);
}

void compute(self_ptr self) {
  auto& st = self->state;
  st.pipeline->before_compute(st.report.run);
  try {
    st.data->next_batch(st.current);
  } catch (const std::exception& e) {
    fail(self, "reading its data failed at step " + std::to_string(st.report.step),
         caf::make_error(caf::sec::runtime_error, e.what()));
    return;
  }
  st.report.data_epoch = st.data->position().epoch;
  st.report.data_offset = st.data->position().offset;
  auto* staging = st.buffers.staging();
  batch_stats stats;
  try {
    stats = staging ? st.links.net->train_step_staged(st.current)
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
  ask_for_step<report_atom>(self, st.coordinator, report);
}

step_hooks hooks_of(self_ptr self) {
  step_hooks hooks;
  hooks.compute = [self] { compute(self); };
  hooks.report = [self](const step_report& report) { count_and_report(self, report); };
  // The chief decides: revoke and grant again (async) or end the run (sync,
  // where no step can complete without this worker's gradient).
  hooks.nonfinite = [self] {
    ask_for_step<nonfinite_atom>(self, self->state.links.chief, self->state.report);
  };
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

// Training starts: ask for as many steps as the lease allows.
void ask_for_first_steps(self_ptr self) {
  for (int32_t i = 0; i < self->state.lease.size(); ++i)
    ask_for_step<report_atom>(self, self->state.coordinator, self->state.report);
}

// A bulk link to shard `s` at `port`, opened with `ticket`; a shard that
// cannot be reached that way stays on BASP.
void open_bulk_link(self_ptr self, size_t s, uint16_t port, uint64_t ticket) {
  auto& st = self->state;
  maybe_failure error;
  auto within = std::min<std::chrono::milliseconds>(st.config.request_timeout,
                                                    std::chrono::seconds(10));
  auto link = bulk_link::open(st.links.bulk.shard_hosts[s], port, st.report.run, ticket, st.label,
                              std::chrono::steady_clock::now() + within, error,
                              st.links.bulk.tls.get());
  if (error)
    spdlog::warn("{}: no bulk path to ps:{} ({}); pulling and pushing over the control connection",
                 st.label, s, error->message);
  else
    st.exchange->set_link(static_cast<int32_t>(s), std::move(link));
}

// The bulk path to every shard in another process that offers one: its port
// and ticket asked over BASP, then connected from here. Training starts
// once every shard answered.
void open_bulk_links(self_ptr self) {
  auto& st = self->state;
  st.exchange->reset_links(st.links.shards.size());
  std::vector<size_t> remote;
  if (st.links.bulk.shard_hosts.size() == st.links.shards.size())
    for (size_t s = 0; s < st.links.shards.size(); ++s)
      if (st.links.shards[s].node() != self->node())
        remote.push_back(s);
  auto join = make_fan_in(remote.size(), [self] { ask_for_first_steps(self); });
  for (auto s : remote)
    self
      ->request(st.links.shards[s], st.config.request_timeout, bulk_atom::value, st.report.run,
                st.config.index)
      .then(
        [self, join, s, gen = st.generation](uint16_t port, uint64_t ticket) {
          if (self->state.generation != gen)
            return;
          if (port != 0)
            open_bulk_link(self, s, port, ticket);
          join->arrive();
        },
        [self, s, gen = st.generation](caf::error& err) {
          if (self->state.generation == gen)
            wait_for_recovery(self, "asking ps:" + std::to_string(s) + " for its bulk path failed",
                              err);
        });
}

void on_plan(self_ptr self, training_plan& plan);

void ask_for_plan(self_ptr self) {
  auto& st = self->state;
  self->request(st.links.chief, st.config.ready_timeout, ready_atom::value, st.config.index)
    .then([self](training_plan& plan) { on_plan(self, plan); },
          [self](caf::error& err) { fail(self, "the chief refused the ready request", err); });
}

// The chief was lost: a helper finds the restarted one at its address (a
// connect can hang on a frozen peer, so not on this actor's thread, whose
// deadline must fire).
void rejoin(self_ptr self) {
  auto& st = self->state;
  auto reconnect = st.links.reconnect.chief;
  auto within = st.config.recovery_timeout;
  auto worker = caf::actor_cast<caf::actor>(self);
  self->spawn<caf::detached>([=](caf::event_based_actor* helper) {
    auto chief = reconnect(within);
    if (chief)
      helper->send(worker, rejoin_atom::value, *chief);
    else
      helper->send(worker, rejoin_atom::value, describe(chief.error()));
  });
}

// The chief answers again: reconnect any shard lost meanwhile and ask it for
// the plan, as at the start.
void on_chief_back(self_ptr self, const chief_actor& chief) {
  auto& st = self->state;
  if (!st.waiting_since)
    return;
  st.links.chief = chief;
  self->monitor(chief);
  if (!reconnect_lost_shards(self))
    return;
  spdlog::info("{}: reached the chief again; asking for its plan", st.label);
  ask_for_plan(self);
}

// The data continue where the checkpoint's position says; false (the worker
// stops) when they cannot.
bool seek_data(self_ptr self, const training_plan& plan) {
  auto& st = self->state;
  if (plan.data_epoch == 0 && plan.data_offset == 0)
    return true;
  try {
    st.data->seek({plan.data_epoch, plan.data_offset});
    // Every step so far read one batch: the dropout masks continue from there.
    auto examples = plan.data_epoch * st.data->share_size() + plan.data_offset;
    st.links.net->skip_training_steps(examples / static_cast<uint64_t>(st.config.batch_size),
                                      st.config.batch_size);
  } catch (const std::exception& e) {
    fail(self, "cannot continue at the checkpoint's data position",
         make_error({errc::invalid_request, e.what()}));
    return false;
  }
  spdlog::info("{}: continuing its data at epoch {}, example {} of its share", st.label,
               plan.data_epoch, plan.data_offset);
  return true;
}

void on_plan(self_ptr self, training_plan& plan) {
  auto& st = self->state;
  st.pipeline->drop(); // of the plan before, if any
  auto& vars = st.links.net->variables();
  try {
    st.router.emplace(std::move(plan.slices), vars, static_cast<int32_t>(st.links.shards.size()));
  } catch (const std::exception& e) {
    fail(self, "the chief's plan does not match this worker's model (" + st.links.net->name() + ")",
         make_error({errc::invalid_request, e.what()}));
    return;
  }
  if (!plan.coordinator) {
    fail(self, "the chief's plan names no step coordinator",
         make_error({errc::invalid_request, "empty coordinator"}));
    return;
  }
  st.coordinator = plan.coordinator;
  st.lease.reset(plan.lease);
  st.report.run = plan.run;
  st.report.step = -1; // a new run (or a restored one) starts by asking
  st.report.applied = false;
  st.waiting_since.reset();
  if (!seek_data(self, plan))
    return;
  st.buffers.reset(*st.router, st.links.net->staging(), vars.size());
  st.pipeline->reset(*st.router);
  st.progress.restart();
  spdlog::info("{}: ready; training on {} of {} examples", st.label, st.data->share_size(),
               st.data->total_examples());
  open_bulk_links(self);
}

// The chief restored the run (a lost shard, or a new chief): a new plan.
void on_restored_plan(self_ptr self, training_plan& plan) {
  auto& st = self->state;
  if (!from_chief_or_here(self, self->current_sender())) {
    refuse(st.label, "a plan", self->current_sender(), "only its chief plans its work");
    return;
  }
  spdlog::info("{}: the run was restored; continuing with run {}", st.label, plan.run);
  ++st.generation; // whatever was in flight belongs to the run before
  if (reconnect_lost_shards(self))
    on_plan(self, plan);
}

// Waiting for the run to recover lasts at most cluster.recovery-timeout.
void on_tick(self_ptr self) {
  auto& st = self->state;
  if (st.waiting_since
      && std::chrono::steady_clock::now() - *st.waiting_since >= st.config.recovery_timeout)
    fail(self, "the run did not recover",
         make_error({errc::training_stopped, "nothing within "
                                               + std::to_string(st.config.recovery_timeout.count())
                                               + " ms (cluster.recovery-timeout)"}));
}

void setup(self_ptr self, worker_config config, worker_links links) {
  auto& st = self->state;
  st.label = "worker:" + std::to_string(config.index);
  st.config = config;
  st.links = std::move(links);
  stream_options data_options;
  data_options.index = static_cast<size_t>(config.index);
  data_options.count = static_cast<size_t>(config.num_workers);
  data_options.seed = config.seed;
  data_options.shuffle = config.shuffle;
  data_options.shuffle_buffer = config.shuffle_buffer;
  data_options.prefetch = config.prefetch;
  data_options.batch_size = static_cast<size_t>(config.batch_size);
  st.data = std::make_unique<example_stream>(st.links.train, data_options);
  st.guard.emplace(config.clip_norm);
  st.progress = progress_meter{config.log_interval};
  st.report.worker = config.index;
  st.basp = std::make_unique<basp_path<std::remove_pointer_t<self_ptr>>>(self, st.links.shards,
                                                                         config.request_timeout);
  st.exchange = std::make_unique<shard_exchange>(*st.basp, config.request_timeout);
  st.pipeline = std::make_unique<step_pipeline>(*st.exchange, st.buffers, st.label,
                                                config.pull_ahead, hooks_of(self));
}

// A peer's end: the chief's normal end is the run's; anything else starts
// recovery.
void on_down(self_ptr self, const caf::down_msg& msg) {
  auto& st = self->state;
  if (msg.reason == caf::exit_reason::normal) {
    // The chief ends normally only once the run is over: a worker that
    // joined too late (its ready or its first asks still open) stops too,
    // instead of waiting out its timeouts. A shard's normal end is the
    // run's: the chief's stop follows.
    if (msg.source == st.links.chief.address()) {
      spdlog::info("{}: the chief finished the run; stop after {} local step(s)", st.label,
                   st.local_step);
      self->quit(caf::exit_reason::normal);
    }
    return;
  }
  if (msg.source == st.links.chief.address()) {
    wait_for_recovery(self, "lost the chief", msg.reason);
    if (can_recover(self))
      self->send(self, rejoin_atom::value);
    return;
  }
  for (size_t s = 0; s < st.links.shards.size(); ++s)
    if (msg.source == st.links.shards[s].address()) {
      st.lost_shards.push_back(static_cast<int32_t>(s));
      wait_for_recovery(self, "lost ps:" + std::to_string(s), msg.reason);
      return;
    }
}

void install_handlers(self_ptr self) {
  self->set_down_handler([self](const caf::down_msg& msg) { on_down(self, msg); });
  // Only this process ends a worker with an exit message (its chief sends
  // stop); an exception ends it at once with the error logged, so its task
  // exits non-zero.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    if (msg.source && msg.source.node() == self->node())
      self->quit(msg.reason);
    else
      spdlog::warn("{}: ignored an exit message from another process", self->state.label);
  });
  self->set_exception_handler([self](std::exception_ptr& eptr) -> caf::error {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(eptr);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("{}: died of an exception: {}; stopping this worker", self->state.label, what);
    return caf::make_error(caf::sec::runtime_error, what);
  });
}

} // namespace

worker_impl::behavior_type worker(worker_impl::stateful_pointer<worker_state> self,
                                  worker_config config, worker_links links) {
  setup(self, config, std::move(links));
  self->monitor(self->state.links.chief);
  for (auto& shard : self->state.links.shards)
    self->monitor(shard);
  install_handlers(self);
  ask_for_plan(self);
  return {
    [self](hello_atom, uint32_t version, const std::string& job, int32_t task) {
      return answer_hello(version, job, task, self->state.label);
    },
    [self](run_atom, uint64_t step_end) {
      if (self->state.lease.latest(step_end))
        start_next_step(self);
    },
    [self](rejoin_atom) { rejoin(self); },
    [self](rejoin_atom, const chief_actor& chief) {
      if (self->current_sender() && self->current_sender()->node() == self->node())
        on_chief_back(self, chief);
    },
    [self](rejoin_atom, const std::string& why) {
      if (self->current_sender() && self->current_sender()->node() == self->node())
        fail(self, "the chief did not come back", make_error({errc::training_stopped, why}));
    },
    [self](plan_atom, training_plan& plan) { on_restored_plan(self, plan); },
    [self](tick_atom) { on_tick(self); },
    [self](stop_atom) {
      if (!from_chief_or_here(self, self->current_sender())) {
        refuse(self->state.label, "a stop", self->current_sender(), "only its chief stops it");
        return;
      }
      spdlog::info("{}: stopped by the chief after {} local step(s)", self->state.label,
                   self->state.local_step);
      self->quit(caf::exit_reason::normal);
    },
    [self](stop_atom, const std::string& why) {
      if (!from_chief_or_here(self, self->current_sender())) {
        refuse(self->state.label, "an abort", self->current_sender(), "only its chief stops it");
        return;
      }
      spdlog::error("{}: the chief ended the run after {} local step(s): {}", self->state.label,
                    self->state.local_step, why);
      self->quit(make_error({errc::training_stopped, "the chief ended the run: " + why}));
    },
  };
}

} // namespace troupe
