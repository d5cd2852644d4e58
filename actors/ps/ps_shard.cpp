#include "actors/ps/ps_shard.hpp"

#include <algorithm>

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/node_id.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/metrics/task_metrics.hpp"
#include "actors/net/socket.hpp"
#include "actors/net/ticket_book.hpp"
#include "actors/ps/shard_endpoint.hpp"

namespace troupe {

namespace {

using self_ptr = ps_shard_impl::stateful_pointer<ps_shard_state>;

// -- who may send what ---------------------------------------------------------

// Only the chief that initialised the shard may steer it.
caf::error unless_from_chief(self_ptr self, const char* what) {
  auto& st = self->state;
  auto sender = self->current_sender();
  if (st.chief && sender && sender->address() == st.chief)
    return caf::none;
  return refuse(st.label, what, sender,
                st.chief ? "only the chief that initialised it may send it"
                         : "it has not been initialised");
}

// Reads and updates belong to the run the shard was initialised for.
caf::error unless_this_run(self_ptr self, run_id run, const char* what) {
  auto& st = self->state;
  // An early request is refused by the store itself: not_initialized.
  if (auto why = st.service->other_run(run))
    return refuse(st.label, what, self->current_sender(), *why);
  return caf::none;
}

// The service's refusal as the answer: a request without the right to it
// is logged with its sender (refuse), the others by their weight.
caf::error refused(self_ptr self, const failure& why, const char* what) {
  auto& st = self->state;
  if (why.code == errc::unauthorized)
    return refuse(st.label, what, self->current_sender(), why.message);
  if (why.code == errc::stale_gradient || why.code == errc::training_stopped)
    spdlog::debug("{}: {}", st.label, why.message);
  else
    spdlog::warn("{}: refused {}: {}", st.label, what, why.message);
  return make_error(why);
}

// -- a step applied -----------------------------------------------------------

snapshot_index take_copy(self_ptr self) {
  // The copy's ticket: what a fetch of it must show; only the chief learns it.
  return self->state.service->take_copy(draw_secret());
}

// A snapshot waiting for this version gets it now, between two updates; one
// whose version was passed (never in a fenced run) is told so.
void answer_wanted_snapshot(self_ptr self) {
  auto& st = self->state;
  if (!st.snapshot_wanted)
    return;
  auto [version, promise] = *st.snapshot_wanted;
  auto now = st.service->version();
  if (now < version)
    return;
  st.snapshot_wanted.reset();
  if (now == version)
    promise.deliver(take_copy(self));
  else
    promise.deliver(
      make_error({errc::snapshot_passed, st.label + " is at version " + std::to_string(now)
                                           + ", past " + std::to_string(version)}));
}

// Sync: a step completed here; the token queue hears of it.
void step_completed(self_ptr self) {
  auto& st = self->state;
  self->send(st.token_queue, applied_atom::value, st.service->run(), st.config.index,
             st.service->version(), st.service->last_straggler_ms());
  answer_wanted_snapshot(self);
}

// -- the chief's control ------------------------------------------------------

// A recovery: the shard's chief restores every shard for a new run after
// losing one, or a new chief takes over after the old one was lost. Either
// way the old state goes, and with it anything of the old run in flight.
bool replaces_state(self_ptr self, run_id run) {
  auto& st = self->state;
  if (!st.service->initialized())
    return false;
  auto sender = self->current_sender();
  bool own_chief = st.chief && sender && sender->address() == st.chief;
  return (own_chief && run != st.service->run()) || st.chief_lost_since.has_value();
}

void reset_state(self_ptr self) {
  auto& st = self->state;
  st.service->reset();
  if (st.snapshot_wanted)
    st.snapshot_wanted->second.deliver(
      make_error({errc::training_stopped, st.label + " was re-initialised for a new run"}));
  st.snapshot_wanted.reset();
  if (st.chief)
    self->demonitor(st.chief);
  st.chief = caf::actor_addr{};
  st.chief_lost_since.reset();
  metrics::readiness(st.label).set(0);
}

shard_setup setup_of(const shard_options& options) {
  return {options.sync,
          options.replicas_to_aggregate,
          options.last_step,
          options.first_step,
          grant_key{options.grant_key0, options.grant_key1},
          options.tables,
          options.shards};
}

caf::result<caf::ok_atom> on_init(self_ptr self, run_id run, const std::vector<std::string>& names,
                                  std::vector<tensor>& values, const shard_options& options) {
  auto& st = self->state;
  if (replaces_state(self, run)) {
    spdlog::info("{}: run {} ends here; a {} initialises it for run {}", st.label,
                 st.service->run(), st.chief_lost_since ? "new chief" : "recovering chief", run);
    reset_state(self);
  }
  if (auto err = st.service->initialize(run, names, std::move(values), setup_of(options)))
    return make_error(*err);
  metrics::readiness(st.label).set(1);
  st.token_queue = options.token_queue;
  // The chief that initialised us owns the run: follow it down, obey it only.
  if (auto chief = caf::actor_cast<caf::actor>(self->current_sender())) {
    st.chief = chief.address();
    self->monitor(chief);
  }
  spdlog::info(
    "{}: initialised {} variable(s), {} bytes, {} embedding table(s) for run {}{}{}", st.label,
    st.service->variables(), st.service->variable_bytes(), st.service->tables(), run,
    options.first_step > 0 ? " at step " + std::to_string(options.first_step) : std::string(),
    options.sync ? ", sync: averaging " + std::to_string(options.replicas_to_aggregate)
                     + " gradient(s) per step"
                 : std::string());
  return caf::ok_atom::value;
}

caf::result<snapshot_index> on_snapshot(self_ptr self, run_id run, int64_t version) {
  auto& st = self->state;
  if (auto err = unless_from_chief(self, "a snapshot request"))
    return err;
  if (auto err = unless_this_run(self, run, "a snapshot request"))
    return err;
  auto now = st.service->version();
  if (now > version)
    return make_error({errc::snapshot_passed, st.label + " is at version " + std::to_string(now)
                                                + ", past " + std::to_string(version)});
  if (now == version)
    return take_copy(self);
  if (st.snapshot_wanted) // superseded: one snapshot at a time
    st.snapshot_wanted->second.deliver(
      make_error({errc::invalid_request, st.label + ": a newer snapshot request replaced it"}));
  auto promise = self->make_response_promise<snapshot_index>();
  st.snapshot_wanted.emplace(version, promise);
  return promise;
}

// Sync mode: the chief changed R (a worker was lost or came back).
void on_replicas(self_ptr self, int32_t required) {
  auto& st = self->state;
  if (unless_from_chief(self, "a change of R") || !st.service->sync() || required < 1)
    return;
  spdlog::info("{}: now averaging {} gradient(s) per step", st.label, required);
  if (st.service->set_required(required))
    step_completed(self);
}

// The chief took a grant back from a worker that held it too long.
void on_revoke(self_ptr self, run_id run, int32_t worker, int64_t step) {
  if (unless_from_chief(self, "a revoked grant") || unless_this_run(self, run, "a revoked grant"))
    return;
  self->state.service->revoke(worker, step);
}

void on_stop(self_ptr self) {
  auto& st = self->state;
  if (unless_from_chief(self, "a stop"))
    return;
  spdlog::info("{}: stop after {} update(s){}", st.label, st.service->version(),
               st.service->sync()
                 ? ", " + std::to_string(st.service->dropped()) + " stale gradient(s) dropped"
                 : std::string());
  self->quit(caf::exit_reason::normal);
}

void on_abort(self_ptr self, int32_t code, const std::string& why) {
  auto& st = self->state;
  if (unless_from_chief(self, "an abort"))
    return;
  auto end = run_end_of(code);
  spdlog::log(end == run_end::preempted ? spdlog::level::warn : spdlog::level::err,
              "{}: the chief ended the run ({}) after {} update(s): {}", st.label, name_of(end),
              st.service->version(), why);
  self->quit(end_error(end, "the chief ended the run: " + why));
}

// -- peers' requests ---------------------------------------------------------------

// A pull of the run over BASP: the values as they are now, copied into the
// reply (the message owns them), and each table's rows. The bulk path's
// pulls take the same way into the service, without the copy.
caf::result<pull_reply> on_pull(self_ptr self, const pull_request& request) {
  pulled out;
  if (auto err = self->state.service->pull(request, out))
    return refused(self, *err, "a pull");
  pull_reply reply{out.version, {}, std::move(out.rows)};
  reply.values.reserve(out.values.size());
  for (auto& value : out.values)
    reply.values.push_back(*value);
  return reply;
}

// A step's push, from a BASP peer or the bulk path alike.
caf::result<push_receipt> on_push(self_ptr self, const step_push& push) {
  auto& st = self->state;
  auto outcome = st.service->push(push);
  if (outcome.refused)
    return refused(self, *outcome.refused, "a push");
  if (outcome.completed)
    step_completed(self);
  else if (!st.service->sync())
    answer_wanted_snapshot(self);
  return outcome.answer;
}

// A peer of the run asks for the bulk path: its port and a ticket for one
// connection (port 0: none here).
caf::result<uint16_t, uint64_t> on_bulk_request(self_ptr self, run_id run, int32_t worker) {
  auto& st = self->state;
  if (!st.service->initialized())
    return make_error({errc::not_initialized, st.label + " has not been initialised"});
  if (auto err = unless_this_run(self, run, "a bulk-path request"))
    return err;
  if (!st.bulk)
    return {uint16_t{0}, uint64_t{0}};
  return {st.bulk->port(), st.bulk->issue_ticket(worker)};
}

caf::result<shard_traffic> on_stats(self_ptr self) {
  if (auto err = unless_from_chief(self, "a stats request"))
    return err;
  return self->state.service->stats(self->state.config.index);
}

// A restored run's optimizer slot, from the chief.
caf::result<caf::ok_atom> on_restore_slot(self_ptr self, run_id run, const std::string& key,
                                          tensor& value) {
  if (auto err = unless_from_chief(self, "a restored slot"))
    return err;
  if (auto err = self->state.service->restore_slot(run, key, std::move(value)))
    return refused(self, *err, "a restored slot");
  return caf::ok_atom::value;
}

// Rows of a checkpoint's embedding table, from the chief.
caf::result<caf::ok_atom> on_restore_rows(self_ptr self, run_id run, const restored_rows& rows) {
  if (auto err = unless_from_chief(self, "restored rows"))
    return err;
  if (auto err = self->state.service->restore_rows(run, rows))
    return refused(self, *err, "restored rows");
  return caf::ok_atom::value;
}

// One tensor of a checkpoint's copy, for the chief's writer.
caf::result<tensor> on_fetch(self_ptr self, run_id run, uint64_t ticket, int32_t index) {
  auto out = self->state.service->fetch(run, ticket, index);
  if (auto* err = std::get_if<failure>(&out))
    return refused(self, *err, "a snapshot fetch");
  return std::move(std::get<tensor>(out));
}

// -- the shard's own life ------------------------------------------------------

// The bulk path beside the BASP port, when troupe-node asks for one; a
// shard without it is pulled from and pushed to over BASP.
void open_bulk_path(self_ptr self, const ps_shard_config& config) {
  auto& st = self->state;
  bulk_server_options options;
  options.host = config.bulk_host;
  options.tls = config.bulk_tls;
  options.shard = config.index;
  maybe_failure error;
  st.bulk = std::make_unique<bulk_server>(
    shard_endpoint(self->system(), self->address(), *st.service), options, error);
  if (error) {
    spdlog::warn("{}: no bulk path ({}); peers pull and push over the control connection", st.label,
                 error->message);
    st.bulk.reset();
    return;
  }
  spdlog::info("{}: bulk path on {}:{}{}", st.label, config.bulk_host, st.bulk->port(),
               config.bulk_tls ? " (mutual TLS)" : "");
}

// The chief that initialised the shard is gone: without recovery the run
// ends; with it, the shard keeps its variables for a new chief.
void on_chief_down(self_ptr self, const caf::down_msg& msg) {
  auto& st = self->state;
  if (msg.source != st.chief)
    return;
  if (st.config.recovery_timeout.count() == 0) {
    spdlog::error("{}: lost the chief ({}); shutting down: the run cannot go on without it",
                  st.label, self->system().render(msg.reason));
    self->quit(end_error(run_end::lost_peer, "lost the chief"));
    return;
  }
  spdlog::warn("{}: lost the chief ({}) after {} update(s); keeping the variables and waiting "
               "up to {} ms for a new chief (cluster.recovery-timeout)",
               st.label, self->system().render(msg.reason), st.service->version(),
               st.config.recovery_timeout.count());
  st.chief_lost_since = std::chrono::steady_clock::now();
  self->delayed_send(self, st.config.recovery_timeout, tick_atom::value);
}

// An exit message ends the shard only from this process (troupe-node's
// shutdown); one from elsewhere is logged and ignored (troupe-node's BASP
// guard refuses them before they reach an actor).
void on_exit_message(self_ptr self, caf::exit_msg& msg) {
  auto& st = self->state;
  if (msg.source && msg.source.node() == self->node()) {
    self->quit(msg.reason);
    return;
  }
  spdlog::warn("{}: ignored an exit message ({}) from {}, which is not in its process", st.label,
               self->system().render(msg.reason),
               msg.source ? "actor " + std::to_string(msg.source.id()) + " on node "
                              + caf::to_string(msg.source.node())
                          : std::string("an anonymous sender"));
}

// SIGTERM, relayed by its own process: the task is preempted (exit code 6,
// retryable). A shard that no chief initialised has nothing to lose; one
// that holds a run's variables takes them along, and the run recovers from
// its latest checkpoint once the task is back.
void on_sigterm(self_ptr self) {
  auto& st = self->state;
  auto sender = self->current_sender();
  if (!sender || sender->node() != self->node()) {
    refuse(st.label, "a leave", sender, "only its own process relays SIGTERM");
    return;
  }
  if (!st.service->initialized()) {
    spdlog::info("{}: stopped by SIGTERM while waiting for its chief; nothing to save", st.label);
    self->quit(end_error(run_end::preempted, "stopped by SIGTERM before its chief came"));
    return;
  }
  spdlog::warn("{}: stopped by SIGTERM after {} update(s) of run {}; its chief recovers the run "
               "from its latest checkpoint once this task is back",
               st.label, st.service->version(), st.service->run());
  self->quit(end_error(run_end::preempted, "stopped by SIGTERM"));
}

// The chief's port says the chief still reads its data (its lobby) when the
// wait ran out: wait as long again. A chief that runs but did not init this
// shard says nothing of the kind. The probe blocks the shard for at most a
// second, while it waits for a chief and has nothing else to do.
bool wait_on_for_chief(self_ptr self, std::chrono::milliseconds wait, const char* setting) {
  auto& st = self->state;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  if (st.config.chief_port == 0
      || !bulk::chief_is_reading(st.config.chief_host, st.config.chief_port, until))
    return false;
  spdlog::info("{}: no chief's init within {} ms ({}), but the chief at {}:{} says it is still "
               "reading its data: waiting {} ms more",
               st.label, wait.count(), setting, st.config.chief_host, st.config.chief_port,
               wait.count());
  self->delayed_send(self, wait, tick_atom::value);
  return true;
}

// No chief came in time (at start), or no new one after the chief was lost.
void on_tick(self_ptr self) {
  auto& st = self->state;
  if (st.chief_lost_since) {
    if (std::chrono::steady_clock::now() - *st.chief_lost_since < st.config.recovery_timeout)
      return;
    if (wait_on_for_chief(self, st.config.recovery_timeout, "cluster.recovery-timeout")) {
      st.chief_lost_since = std::chrono::steady_clock::now();
      return;
    }
    spdlog::error("{}: no new chief within {} ms (cluster.recovery-timeout); shutting down",
                  st.label, st.config.recovery_timeout.count());
    self->quit(end_error(run_end::lost_peer, "no new chief came within cluster.recovery-timeout"));
    return;
  }
  if (st.service->initialized()
      || wait_on_for_chief(self, st.config.init_timeout, "cluster.connect-timeout"))
    return;
  auto port = st.config.chief_port == 0
                ? std::string()
                : " (" + st.config.chief_host + ":" + std::to_string(st.config.chief_port)
                    + " does not say it is reading its data)";
  spdlog::error("{}: no chief initialised this shard in time (cluster.connect-timeout){}; is the "
                "chief running, and does it list this address?",
                st.label, port);
  self->quit(end_error(run_end::lost_peer, "no chief came within cluster.connect-timeout"));
}

} // namespace

ps_shard_impl::behavior_type ps_shard(ps_shard_impl::stateful_pointer<ps_shard_state> self,
                                      ps_shard_config config) {
  auto& st = self->state;
  st.config = config;
  st.label = "ps:" + std::to_string(config.index);
  metrics::readiness(st.label).set(0); // until the chief initialises it
  st.service.emplace(st.label, config.index, config.optimizer);
  if (!config.bulk_host.empty())
    open_bulk_path(self, config);
  self->set_down_handler([self](const caf::down_msg& msg) { on_chief_down(self, msg); });
  self->set_exit_handler([self](caf::exit_msg& msg) { on_exit_message(self, msg); });
  if (config.init_timeout.count() > 0)
    self->delayed_send(self, config.init_timeout, tick_atom::value);
  return {
    [self](hello_atom, uint32_t version, const std::string& job, int32_t task)
      -> caf::result<uint32_t> { return answer_hello(version, job, task, self->state.label); },
    [self](init_atom, run_id run, const std::vector<std::string>& names,
           std::vector<tensor>& values,
           const shard_options& options) { return on_init(self, run, names, values, options); },
    [self](pull_atom, const pull_request& request) { return on_pull(self, request); },
    [self](push_atom, const step_push& push) { return on_push(self, push); },
    [self](revoke_atom, run_id run, int32_t worker, int64_t step) {
      on_revoke(self, run, worker, step);
    },
    [self](bulk_atom, run_id run, int32_t worker) { return on_bulk_request(self, run, worker); },
    [self](stats_atom) { return on_stats(self); },
    [self](restore_atom, run_id run, const std::string& key, tensor& value) {
      return on_restore_slot(self, run, key, value);
    },
    [self](restore_atom, run_id run, const restored_rows& rows) {
      return on_restore_rows(self, run, rows);
    },
    [self](snapshot_atom, run_id run, int64_t version) { return on_snapshot(self, run, version); },
    [self](fetch_atom, run_id run, uint64_t ticket, int32_t index) {
      return on_fetch(self, run, ticket, index);
    },
    [self](replicas_atom, int32_t required) { on_replicas(self, required); },
    [self](stop_atom) { on_stop(self); },
    [self](stop_atom, int32_t end, const std::string& why) { on_abort(self, end, why); },
    [self](tick_atom) { on_tick(self); },
    [self](leave_atom) { on_sigterm(self); },
  };
}

} // namespace troupe
