#include "actors/ps/ps_shard.hpp"

#include <algorithm>

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/node_id.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/net/socket.hpp"
#include "actors/net/ticket_book.hpp"
#include "actors/protocol/grant_proof.hpp"
#include "actors/ps/shard_endpoint.hpp"
#include "actors/ps/shard_run.hpp"

namespace troupe {

namespace shard_run {

// The shard's state between two updates: its variables and slots, and its
// buckets of each embedding table.
snapshot_index take_copy(self_ptr self) {
  auto& st = self->state;
  st.snapshot.clear(); // the earlier views end before new ones begin
  std::vector<table_snapshot> tables;
  size_t piece_rows = size_t{1} << 20;
  for (size_t t = 0; t < st.tables.size(); ++t) {
    tables.emplace_back(st.tables.table(t));
    piece_rows = std::min(piece_rows, static_cast<size_t>(st.tables.max_keys(t)));
  }
  // The copy's ticket: what a fetch of it must show; only the chief learns it.
  return st.snapshot.take(st.store->take_snapshot(), draw_secret(), std::move(tables), piece_rows);
}

// A snapshot waiting for this version gets it now, between two updates; one
// whose version was passed (never in a fenced run) is told so.
void answer_wanted_snapshot(self_ptr self) {
  auto& st = self->state;
  if (!st.snapshot_wanted)
    return;
  auto [version, promise] = *st.snapshot_wanted;
  auto now = st.store->version();
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
  if (auto why = st.store->other_run(run))
    return refuse(st.label, what, self->current_sender(), *why);
  return caf::none;
}

// A recovery: the shard's chief restores every shard for a new run after
// losing one, or a new chief takes over after the old one was lost. Either
// way the old state goes, and with it anything of the old run in flight.
bool replaces_state(self_ptr self, run_id run) {
  auto& st = self->state;
  if (!st.store->initialized())
    return false;
  auto sender = self->current_sender();
  bool own_chief = st.chief && sender && sender->address() == st.chief;
  return (own_chief && run != st.run) || st.chief_lost_since.has_value();
}

void reset_state(self_ptr self) {
  auto& st = self->state;
  st.store->reset();
  st.pending.reset();
  st.snapshot.clear(); // its views of the tables end before the tables do
  st.tables.reset();
  if (st.snapshot_wanted)
    st.snapshot_wanted->second.deliver(
      make_error({errc::training_stopped, st.label + " was re-initialised for a new run"}));
  st.snapshot_wanted.reset();
  if (st.chief)
    self->demonitor(st.chief);
  st.chief = caf::actor_addr{};
  st.chief_lost_since.reset();
}

caf::result<caf::ok_atom> on_init(self_ptr self, run_id run, const std::vector<std::string>& names,
                                  std::vector<tensor>& values, const shard_options& options) {
  auto& st = self->state;
  if (options.first_step < 0)
    return make_error({errc::invalid_request, st.label + ": init at a negative step"});
  if (replaces_state(self, run)) {
    spdlog::info("{}: run {} ends here; a {} initialises it for run {}", st.label, st.run,
                 st.chief_lost_since ? "new chief" : "recovering chief", run);
    reset_state(self);
  }
  if (!options.tables.empty()) {
    st.snapshot.clear(); // a copy's views of the tables end before the tables do
    if (auto err = st.tables.configure(options.tables, st.index, options.shards, options.sync,
                                       options.replicas_to_aggregate, options.first_step))
      return make_error(*err);
  }
  if (auto err = st.store->initialize(names, std::move(values), options.first_step, run)) {
    st.snapshot.clear(); // tables kept from before may be under a copy's view
    st.tables.reset();
    return make_error(*err);
  }
  st.run = run;
  st.options = options;
  st.applied = applied_steps(options.first_step);
  if (options.sync)
    st.pending.emplace(names, options.replicas_to_aggregate, options.first_step);
  // The chief that initialised us owns the run: follow it down, obey it only.
  if (auto chief = caf::actor_cast<caf::actor>(self->current_sender())) {
    st.chief = chief.address();
    self->monitor(chief);
  }
  spdlog::info("{}: initialised {} variable(s), {} bytes, {} embedding table(s) for run {}{}{}",
               st.label, st.store->size(), st.store->bytes(), st.tables.size(), run,
               options.first_step > 0 ? " at step " + std::to_string(options.first_step)
                                      : std::string(),
               options.sync ? ", sync: averaging " + std::to_string(options.replicas_to_aggregate)
                                + " gradient(s) per step"
                            : std::string());
  return caf::ok_atom::value;
}

// A pull of the run over BASP: the values as they are now, counted, copied
// into the reply (the message owns them). The bulk path's pulls take the
// same way into the store (pin), without the copy.
caf::result<pull_reply> on_pull(self_ptr self, run_id run, const std::vector<std::string>& names,
                                int32_t precision) {
  auto& st = self->state;
  if (auto err = unless_this_run(self, run, "a pull"))
    return err;
  std::vector<std::shared_ptr<const tensor>> values;
  int64_t version = 0;
  if (auto err = st.store->pin(run, names, values, version, precision))
    return make_error(*err);
  st.traffic.pulled(names, values);
  pull_reply reply{version, {}};
  reply.values.reserve(values.size());
  for (auto& value : values)
    reply.values.push_back(*value);
  return reply;
}

// A push must show the proof its coordinator signed the grant of its step
// to its worker with (grant_proof.hpp): a peer that knows the run, or a
// bulk ticket, cannot push a step nobody granted it.
caf::error unless_granted(self_ptr self, int32_t worker, int64_t step, uint64_t proof) {
  auto& st = self->state;
  grant_key key{st.options.grant_key0, st.options.grant_key1};
  if (key.empty() || proof == grant_proof(key, st.run, worker, step))
    return caf::none;
  st.traffic.unauthorized_push();
  return refuse(st.label,
                "a push of step " + std::to_string(step) + " as worker:" + std::to_string(worker),
                self->current_sender(),
                "its grant proof is not the one of that step for that worker: nobody granted it");
}

caf::result<int64_t> on_push(self_ptr self, run_id run, int32_t worker, int64_t step,
                             uint64_t proof, int32_t precision,
                             const std::vector<std::string>& names,
                             const std::vector<tensor>& packed) {
  auto& st = self->state;
  if (auto err = unless_this_run(self, run, "a push"))
    return err;
  if (auto err = unless_granted(self, worker, step, proof))
    return err;
  st.traffic.pushed(names, packed); // the bytes that crossed the wire
  // Packed gradients are widened into the shard's own storage first; the
  // optimizer and the sync accumulator see fp32 only.
  const std::vector<tensor>* widened = &packed;
  if (precision != static_cast<int32_t>(wire_precision::fp32)) {
    if (auto err = st.store->widen_gradients(names, precision, packed, st.widened)) {
      spdlog::warn("{}: refused push for step {}: {}", st.label, step, err->message);
      return make_error(*err);
    }
    widened = &st.widened;
  }
  auto& gradients = *widened;
  if (st.pending)
    return sync_push(self, worker, step, names, gradients);
  if (st.applied.contains(step)) {
    // A step granted again after its first worker was lost, whose push had
    // landed: it is in, so the second one counts as done without applying.
    spdlog::info("{}: step {} is applied already; worker:{}'s push of it is not applied again",
                 st.label, step, worker);
    return st.store->version();
  }
  if (auto err = st.store->apply_gradients(names, gradients)) {
    spdlog::warn("{}: refused push for step {}: {}", st.label, step, err->message);
    return make_error(*err);
  }
  st.applied.add(step);
  answer_wanted_snapshot(self);
  return st.store->version();
}

caf::result<snapshot_index> on_snapshot(self_ptr self, run_id run, int64_t version) {
  auto& st = self->state;
  if (auto err = unless_from_chief(self, "a snapshot request"))
    return err;
  if (auto err = unless_this_run(self, run, "a snapshot request"))
    return err;
  auto now = st.store->version();
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

// The bulk path beside the BASP port, when troupe-node asks for one; a
// shard without it is pulled from and pushed to over BASP.
void open_bulk_path(self_ptr self, const ps_shard_config& config) {
  auto& st = self->state;
  bulk_server_options options;
  options.host = config.bulk_host;
  options.tls = config.bulk_tls;
  options.shard = config.index;
  maybe_failure error;
  st.bulk = std::make_unique<bulk_server>(shard_endpoint(self->system(), self->address(), *st.store,
                                                         st.tables, st.snapshot, st.traffic,
                                                         st.label),
                                          options, error);
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
    self->quit(msg.reason);
    return;
  }
  spdlog::warn("{}: lost the chief ({}) after {} update(s); keeping the variables and waiting "
               "up to {} ms for a new chief (cluster.recovery-timeout)",
               st.label, self->system().render(msg.reason), st.store->version(),
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

// A peer of the run asks for the bulk path: its port and a ticket for one
// connection (port 0: none here).
caf::result<uint16_t, uint64_t> on_bulk_request(self_ptr self, run_id run, int32_t worker) {
  auto& st = self->state;
  if (!st.store->initialized())
    return make_error({errc::not_initialized, st.label + " has not been initialised"});
  if (auto err = unless_this_run(self, run, "a bulk-path request"))
    return err;
  if (!st.bulk)
    return {uint16_t{0}, uint64_t{0}};
  return {st.bulk->port(), st.bulk->issue_ticket(worker)};
}

caf::result<shard_traffic> on_stats(self_ptr self) {
  auto& st = self->state;
  if (auto err = unless_from_chief(self, "a stats request"))
    return err;
  auto out = st.traffic.report(st.index, st.store->bytes());
  out.updates = st.store->version();
  out.tables = table_reports(self);
  return out;
}

// A restored run's optimizer slot, from the chief.
caf::result<caf::ok_atom> on_restore_slot(self_ptr self, run_id run, const std::string& key,
                                          tensor& value) {
  auto& st = self->state;
  if (auto err = unless_from_chief(self, "a restored slot"))
    return err;
  if (auto err = unless_this_run(self, run, "a restored slot"))
    return err;
  if (auto err = st.store->restore_slot(key, std::move(value)))
    return make_error(*err);
  return caf::ok_atom::value;
}

// One tensor of a checkpoint's copy, for the chief's writer.
caf::result<tensor> on_fetch(self_ptr self, run_id run, uint64_t ticket, int32_t index) {
  auto& st = self->state;
  auto out = st.snapshot.fetch(*st.store, run, st.label, ticket, index);
  if (auto* err = std::get_if<failure>(&out)) {
    if (err->code == errc::unauthorized)
      return refuse(st.label, "a snapshot fetch", self->current_sender(), err->message);
    return make_error(*err);
  }
  return std::move(std::get<tensor>(out));
}

// Sync mode: the chief changed R (a worker was lost or came back).
void on_replicas(self_ptr self, int32_t required) {
  auto& st = self->state;
  if (unless_from_chief(self, "a change of R") || !st.pending || required < 1)
    return;
  spdlog::info("{}: now averaging {} gradient(s) per step", st.label, required);
  st.pending->set_required(required);
  st.tables.set_required(required);
  apply_if_ready(self);
}

void on_stop(self_ptr self) {
  auto& st = self->state;
  if (unless_from_chief(self, "a stop"))
    return;
  spdlog::info("{}: stop after {} update(s){}", st.label, st.store->version(),
               st.pending
                 ? ", " + std::to_string(st.pending->dropped()) + " stale gradient(s) dropped"
                 : std::string());
  self->quit(caf::exit_reason::normal);
}

void on_abort(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (unless_from_chief(self, "an abort"))
    return;
  spdlog::error("{}: the chief ended the run after {} update(s): {}", st.label, st.store->version(),
                why);
  self->quit(make_error({errc::training_stopped, "the chief ended the run: " + why}));
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

// SIGTERM, relayed by its own process: a shard that no chief initialised
// has nothing to lose and ends normally; one that holds a run's variables
// ends with an error, and the run recovers from its latest checkpoint once
// the task is back.
void on_sigterm(self_ptr self) {
  auto& st = self->state;
  auto sender = self->current_sender();
  if (!sender || sender->node() != self->node()) {
    refuse(st.label, "a leave", sender, "only its own process relays SIGTERM");
    return;
  }
  if (!st.store->initialized()) {
    spdlog::info("{}: stopped by SIGTERM while waiting for its chief; nothing to save", st.label);
    self->quit(caf::exit_reason::normal);
    return;
  }
  spdlog::warn("{}: stopped by SIGTERM after {} update(s) of run {}; its chief recovers the run "
               "from its latest checkpoint once this task is back",
               st.label, st.store->version(), st.run);
  self->quit(make_error({errc::training_stopped, "stopped by SIGTERM"}));
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
    self->quit(make_error({errc::training_stopped, "no new chief came"}));
    return;
  }
  if (st.store->initialized()
      || wait_on_for_chief(self, st.config.init_timeout, "cluster.connect-timeout"))
    return;
  auto port = st.config.chief_port == 0
                ? std::string()
                : " (" + st.config.chief_host + ":" + std::to_string(st.config.chief_port)
                    + " does not say it is reading its data)";
  spdlog::error("{}: no chief initialised this shard in time (cluster.connect-timeout){}; is the "
                "chief running, and does it list this address?",
                st.label, port);
  self->quit(make_error({errc::not_initialized, "no chief came"}));
}

} // namespace shard_run

ps_shard_impl::behavior_type ps_shard(ps_shard_impl::stateful_pointer<ps_shard_state> self,
                                      ps_shard_config config) {
  using namespace shard_run;
  auto& st = self->state;
  st.config = config;
  st.index = config.index;
  st.label = "ps:" + std::to_string(config.index);
  st.store.emplace(st.label, config.optimizer);
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
    [self](pull_atom, run_id run, const std::vector<std::string>& names, int32_t precision) {
      return on_pull(self, run, names, precision);
    },
    [self](push_atom, run_id run, int32_t worker, int64_t step, uint64_t proof, int32_t precision,
           const std::vector<std::string>& names, const std::vector<tensor>& gradients) {
      return on_push(self, run, worker, step, proof, precision, names, gradients);
    },
    [self](rows_atom, run_id run, int32_t table, const row_keys& keys) {
      return on_rows(self, run, table, keys);
    },
    [self](push_rows_atom, run_id run, int32_t worker, int64_t step, uint64_t proof, int32_t table,
           const row_keys& keys, const tensor& grads) {
      return on_push_rows(self, run, worker, step, proof, table, keys, grads);
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
    [self](stop_atom, const std::string& why) { on_abort(self, why); },
    [self](tick_atom) { on_tick(self); },
    [self](leave_atom) { on_sigterm(self); },
  };
}

} // namespace troupe
